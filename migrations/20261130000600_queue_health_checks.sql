-- `ingest health`: also report indexed documents without a committed generation, and
-- compare all three stored counts (pages, sections, chunks) with the committed rows.
create or replace function ingestion_queue_health(p_stale_after_seconds integer default 300)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, public, pg_temp
as $$
    select jsonb_build_object(
        'ok', true,
        'jobs_by_status', (select coalesce(jsonb_object_agg(status, n), '{}')
                             from (select status, count(*) as n from ingestion_jobs group by status) s),
        'oldest_pending_age_seconds', (select extract(epoch from now() - min(created_at))::bigint
                                         from ingestion_jobs where status = 'pending'),
        'stale_leases', (select count(*) from ingestion_jobs
                          where status = 'processing'
                            and locked_at < now() - make_interval(secs => p_stale_after_seconds)),
        'stuck_batches', (select count(*) from stuck_import_batch_ids(1000000)),
        'count_mismatches', (select count(*) from documents d
                              where d.index_generation_id is not null
                                and (d.page_count, d.section_count, d.chunk_count) is distinct from (
                                    (select count(*) from document_pages p
                                      where p.document_id = d.id and p.index_generation_id = d.index_generation_id),
                                    (select count(*) from document_sections s
                                      where s.document_id = d.id and s.index_generation_id = d.index_generation_id),
                                    (select count(*) from document_chunks c
                                      where c.document_id = d.id and c.index_generation_id = d.index_generation_id))),
        'indexed_without_generation', (select count(*) from documents
                                        where status = 'indexed' and index_generation_id is null
                                          and deleted_at is null),
        'generations_awaiting_cleanup', (select count(*) from index_generations g
                                          join documents d on d.id = g.document_id
                                         where g.status <> 'committed'
                                           and g.id is distinct from d.index_generation_id)
    );
$$;
