-- The fenced stage log, and the read-side RPC behind `ingest status`: the Python layer
-- reads the queue and batches through RPCs, never by querying those tables itself.

-- A worker appends a stage row only while it holds the job's lease: after a takeover the
-- old holder writes nothing further, not even to the log.
create function record_ingestion_job_stage(
    p_job_id uuid,
    p_worker_id text,
    p_stage text,
    p_started_at timestamptz,
    p_finished_at timestamptz default now(),
    p_detail jsonb default '{}'
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_document_id uuid;
begin
    -- FOR SHARE: a claim that takes the job over waits for this row, or this waits for it.
    select document_id into v_document_id from ingestion_jobs
     where id = p_job_id and status = 'processing' and locked_by = p_worker_id
       for share;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'job_id', p_job_id);
    end if;
    insert into ingestion_job_stages (job_id, document_id, worker_id, stage, started_at, finished_at, detail)
    values (p_job_id, v_document_id, p_worker_id, p_stage, p_started_at, p_finished_at, coalesce(p_detail, '{}'));
    return jsonb_build_object('ok', true);
end;
$$;

create function ingestion_batch_report(p_batch_id uuid default null, p_limit integer default 20)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, public, pg_temp
as $$
    with chosen as (
        select b.*
          from import_batches b
         where p_batch_id is null or b.id = p_batch_id
         order by b.created_at desc, b.id
         limit greatest(p_limit, 1)
    ), job_counts as (
        select j.batch_id,
               count(*) filter (where j.status = 'pending') as pending,
               count(*) filter (where j.status = 'processing') as processing,
               count(*) filter (where j.status = 'completed') as completed,
               count(*) filter (where j.status = 'failed') as failed,
               extract(epoch from now() - min(j.created_at) filter (where j.status = 'pending'))::bigint
                   as oldest_pending_age_seconds
          from ingestion_jobs j
          join chosen c on c.id = j.batch_id
         group by j.batch_id
    )
    select jsonb_build_object(
        'ok', true,
        'batches', coalesce((
            select jsonb_agg(jsonb_build_object(
                       'batch_id', c.id, 'name', c.name, 'status', c.status,
                       'total_files', c.total_files, 'completed_files', c.completed_files,
                       'failed_files', c.failed_files, 'created_at', c.created_at,
                       'completed_at', c.completed_at,
                       'pending', coalesce(k.pending, 0), 'processing', coalesce(k.processing, 0),
                       'completed', coalesce(k.completed, 0), 'failed', coalesce(k.failed, 0),
                       'oldest_pending_age_seconds', k.oldest_pending_age_seconds)
                   order by c.created_at desc, c.id)
              from chosen c left join job_counts k on k.batch_id = c.id), '[]'::jsonb),
        'failures', coalesce((
            select jsonb_agg(f order by f ->> 'failed_at' desc)
              from (select jsonb_build_object(
                               'job_id', j.id, 'batch_id', j.batch_id, 'document_id', j.document_id,
                               'source_name', d.source_name, 'attempt_count', j.attempt_count,
                               'max_attempts', j.max_attempts, 'stage', j.stage,
                               'error_message', j.error_message, 'failed_at', j.completed_at) as f
                      from ingestion_jobs j
                      join chosen c on c.id = j.batch_id
                      join documents d on d.id = j.document_id
                     where j.status = 'failed'
                     order by j.completed_at desc nulls last
                     limit 50) failures), '[]'::jsonb)
    );
$$;

select secure_rpc('record_ingestion_job_stage(uuid, text, text, timestamptz, timestamptz, jsonb)');
select secure_rpc('ingestion_batch_report(uuid, integer)');
