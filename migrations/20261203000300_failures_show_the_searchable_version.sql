-- `ingest status` says what a failed version left searchable (issue 31): each failure carries
-- the document's indexed version (the one search still returns; null when none is) and its
-- latest version, so "version 2 failed" reads "version 2 failed, version 1 still searchable",
-- or, once a version 3 was indexed, shows that the failure no longer matters.
--
-- Expand/contract: the same function and signature with two more keys in each failure; the
-- previous release's client ignores them.

create or replace function public.ingestion_batch_report(p_batch_id uuid default null, p_limit integer default 20,
                                                         p_collection text default null)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    -- `p_collection is null or exists (…)`: the look-up runs only when a collection is asked.
    with chosen as (
        select b.*
          from public.import_batches b
         where (p_batch_id is null or b.id = p_batch_id)
           and (p_collection is null
                or exists (select 1 from public.ingestion_jobs j join public.documents d on d.id = j.document_id
                            where j.batch_id = b.id and d.collection = p_collection))
         order by b.created_at desc, b.id
         limit greatest(p_limit, 1)
    ), job_counts as (
        select j.batch_id,
               count(*) as jobs,
               count(*) filter (where j.status = 'pending') as pending,
               count(*) filter (where j.status = 'processing') as processing,
               count(*) filter (where j.status = 'completed') as completed,
               count(*) filter (where j.status = 'failed') as failed,
               count(*) filter (where j.status = 'cancelled') as cancelled,
               extract(epoch from now() - min(j.created_at) filter (where j.status = 'pending'))::bigint
                   as oldest_pending_age_seconds
          from public.ingestion_jobs j
          join chosen c on c.id = j.batch_id
         where p_collection is null
            or exists (select 1 from public.documents d where d.id = j.document_id and d.collection = p_collection)
         group by j.batch_id
    )
    select jsonb_build_object(
        'ok', true,
        'collection', p_collection,
        'batches', coalesce((
            select jsonb_agg(jsonb_build_object(
                       'batch_id', c.id, 'name', c.name, 'status', c.status,
                       'total_files', c.total_files, 'completed_files', c.completed_files,
                       'failed_files', c.failed_files, 'cancelled_files', c.cancelled_files,
                       'created_at', c.created_at, 'completed_at', c.completed_at, 'cancelled_at', c.cancelled_at,
                       'jobs', coalesce(k.jobs, 0),
                       'pending', coalesce(k.pending, 0), 'processing', coalesce(k.processing, 0),
                       'completed', coalesce(k.completed, 0), 'failed', coalesce(k.failed, 0),
                       'cancelled', coalesce(k.cancelled, 0),
                       'oldest_pending_age_seconds', k.oldest_pending_age_seconds)
                   order by c.created_at desc, c.id)
              from chosen c left join job_counts k on k.batch_id = c.id), '[]'::jsonb),
        'failures', coalesce((
            select jsonb_agg(f order by f ->> 'failed_at' desc)
              from (select jsonb_build_object(
                               'job_id', j.id, 'batch_id', j.batch_id, 'document_id', j.document_id,
                               'source_name', d.source_name, 'collection', d.collection,
                               'source_key', d.source_key, 'version', j.document_version,
                               'indexed_version', case when d.deleted_at is null and d.index_generation_id is not null
                                                       then d.indexed_version end, 'latest_version', d.version,
                               'attempt_count', j.attempt_count,
                               'max_attempts', j.max_attempts, 'stage', j.stage,
                               'error_message', j.error_message, 'failed_at', j.completed_at) as f
                      from public.ingestion_jobs j
                      join chosen c on c.id = j.batch_id
                      join public.documents d on d.id = j.document_id
                     where j.status = 'failed' and (p_collection is null or d.collection = p_collection)
                     order by j.completed_at desc nulls last
                     limit 50) failures), '[]'::jsonb)
    );
$$;

select public.secure_rpc('public.ingestion_batch_report(uuid, integer, text)');
