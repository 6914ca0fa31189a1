-- What the index holds, as a whole (issue 48, "a UI that tells the truth"): the Dagster asset
-- `document_index` showed the numbers of the last drain run only (`documents_indexed 1` with
-- ~480 documents indexed), and nothing at all of a drain by `ingest work`.
--
-- ingestion_index_totals() reads, in one call, what `ingest status` prints above its batches
-- and what every materialization of `document_index` records (docs/orchestration.md):
--   documents_by_status  live documents (not deleted) by status;
--   chunks               the chunks search reads: the stored counts of live documents' committed
--                        generations (the check counts_match_rows keeps them equal to the rows);
--   collections, sources the collections and the registered sources;
--   failed_jobs          jobs failed for good (what `ingest retry --all-failed` would queue);
--   jobs_finished, last_finished_at
--                        jobs a drain finished (completed or failed) and when the latest was:
--                        the mark by which Dagster's index_totals_sensor tells that a drain it did
--                        not run (`ingest work`) changed the index since the latest
--                        materialization. Both, as completed_at is the acknowledging
--                        transaction's start: a count notices what a time could miss.
-- One pass over documents and one over ingestion_jobs (no index: a read every sensor interval,
-- not per job); collections and sync_sources are small.
create function public.ingestion_index_totals()
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select jsonb_build_object(
        'ok', true,
        'documents_by_status', (select coalesce(jsonb_object_agg(status, n), '{}')
                                  from (select status, count(*) as n from public.documents
                                         where deleted_at is null group by status) s),
        'chunks', (select coalesce(sum(chunk_count), 0) from public.documents
                    where deleted_at is null and index_generation_id is not null),
        'collections', (select count(*) from public.collections),
        'sources', (select count(*) from public.sync_sources),
        'failed_jobs', j.failed,
        'jobs_finished', j.finished,
        'last_finished_at', j.last_finished_at
    )
      from (select count(*) filter (where status = 'failed') as failed,
                   count(*) as finished,
                   max(completed_at) as last_finished_at
              from public.ingestion_jobs
             where status in ('completed', 'failed')) j;
$$;

select public.secure_rpc('public.ingestion_index_totals()');
