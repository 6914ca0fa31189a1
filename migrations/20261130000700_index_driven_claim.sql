-- An index-driven claim: same contract, same signature, cost independent of the backlog.
-- (Rows locked by a branch but not chosen stay locked only until this claim commits.)

create or replace function claim_ingestion_jobs(
    p_worker_id text,
    p_claim_limit integer default 1,
    p_stale_after_seconds integer default 300
)
returns table (
    job_id uuid,
    document_id uuid,
    batch_id uuid,
    kind text,
    attempt_count integer,
    max_attempts integer,
    locked_by text,
    locked_at timestamptz,
    source_name text,
    mime_type text,
    content_sha256 text,
    byte_size bigint,
    committed_generation_id uuid
)
language plpgsql
security definer
set search_path = pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
begin
    if p_worker_id is null or btrim(p_worker_id) = '' then
        raise exception 'claim_ingestion_jobs: p_worker_id is required' using errcode = '22023';
    end if;

    return query
    -- Two branches, each walking its own partial index in claim order and locking as it
    -- goes, so a claim costs O(limit) however long the backlog (one OR under one ORDER BY
    -- made the planner read and sort every claimable row: bench/claim_scaling.py).
    with pending as (
        select j.id, j.next_run_at, j.created_at
          from ingestion_jobs j
          join documents d on d.id = j.document_id
         where j.status = 'pending' and j.next_run_at <= now() and j.attempt_count < j.max_attempts
         order by j.next_run_at, j.created_at
         limit greatest(p_claim_limit, 0)
           for update of j, d skip locked
    ), stale as (
        select j.id, j.next_run_at, j.created_at
          from ingestion_jobs j
          join documents d on d.id = j.document_id
         where j.status = 'processing'
           and j.locked_at < now() - make_interval(secs => p_stale_after_seconds)
           -- a worker id never reclaims its own stale job: both runs would pass the fence
           and j.locked_by is distinct from p_worker_id
           and j.attempt_count < j.max_attempts
         order by j.locked_at
         limit greatest(p_claim_limit, 0)
           for update of j, d skip locked
    ), candidates as (
        select c.id from (select * from pending union all select * from stale) c
         order by c.next_run_at, c.created_at
         limit greatest(p_claim_limit, 0)
    ), claimed as (
        update ingestion_jobs j
           set status = 'processing',
               stage = 'claimed',
               progress = 0,
               attempt_count = j.attempt_count + 1,
               locked_by = p_worker_id,
               locked_at = now(),
               started_at = coalesce(j.started_at, now()),
               updated_at = now()
          from candidates c
         where j.id = c.id
        returning j.id, j.document_id, j.batch_id, j.kind, j.attempt_count, j.max_attempts,
                  j.locked_by, j.locked_at
    ), touched as (
        -- An indexed document stays indexed (and readable) while it is rebuilt.
        update documents d
           set status = case when d.index_generation_id is null then 'processing' else d.status end,
               updated_at = now()
          from claimed c
         where d.id = c.document_id
        returning d.id, d.source_name, d.mime_type, d.content_sha256, d.byte_size, d.index_generation_id
    )
    select c.id, c.document_id, c.batch_id, c.kind, c.attempt_count, c.max_attempts,
           c.locked_by, c.locked_at, t.source_name, t.mime_type, t.content_sha256, t.byte_size,
           t.index_generation_id
      from claimed c
      join touched t on t.id = c.document_id;
end;
$$;
