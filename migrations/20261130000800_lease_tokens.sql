-- Fencing tokens, a lease deadline on the row, one-transaction commit-and-complete, an
-- artifact fence enforced by the database, and search_path = pg_catalog, pg_temp for
-- every SECURITY DEFINER function (docs/state-machine.md). What it closes, each
-- reproduced at the previous head (tests/race/test_lease_tokens.py and friends):
--   * one claim loop reuses one worker id, so a stalled thread of loop W passes the
--     worker-id fence again once W re-claims the job (worker-id reuse);
--   * artifact rows were fenced only by the client: any writer could add rows to a
--     committed generation;
--   * commit and complete were two transactions: a final attempt dead-lettered between
--     them left an indexed document under a failed job;
--   * the stale window was each caller's parameter: a janitor with a shorter setting
--     took leases that were still live;
--   * commit accepted any building generation of the document;
--   * definer functions searched `public`, so a `public.make_interval(integer)` created by
--     any role allowed to create there ran as the function owner;
--   * a batch whose files were all duplicates stayed `pending` forever.
--
-- Expand/contract: every fenced RPC gains `p_lease_token bigint default null` as its new
-- last parameter. Without it the worker-id fence applies as before, so the calls earlier
-- releases make (4-argument complete, 8-argument fail, worker-id heartbeat) still resolve.

-- The lease, on the row. lease_token: the fencing token, +1 at every claim, never reset.
-- lease_expires_at: the deadline that reclaim and expiry read. lease_seconds: the
-- claimer's window, by which each heartbeat extends the deadline.
alter table ingestion_jobs
    add column lease_token bigint not null default 0,
    add column lease_expires_at timestamptz,
    add column lease_seconds integer;
-- Jobs in flight during the upgrade keep the default window they were claimed under.
update ingestion_jobs
   set lease_expires_at = locked_at + interval '300 seconds', lease_seconds = 300
 where status = 'processing';

-- The token of the claim that began the generation: only that claim may fill or commit it.
alter table index_generations add column lease_token bigint not null default 0;

-- The fence. Lock the job row (always first: job rows, then documents, then batches) and
-- check the caller's claim. With a token the fence is the token; without one, the worker
-- id (older callers). Returns null when the caller may proceed, else the refusal.
create function public.lock_fenced_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_worker_id text,
    p_lease_token bigint
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job public.ingestion_jobs%rowtype;
begin
    select * into v_job from public.ingestion_jobs where id = p_job_id for update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found', 'job_id', p_job_id);
    end if;
    if (p_lease_token is not null
        and (v_job.status <> 'processing' or v_job.lease_token <> p_lease_token))
       or (p_lease_token is null and p_worker_id is not null
        and (v_job.status <> 'processing' or v_job.locked_by is distinct from p_worker_id)) then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'job_id', p_job_id);
    end if;
    if v_job.status not in ('pending', 'processing') then
        return jsonb_build_object('ok', false, 'reason', 'not_open', 'job_id', p_job_id, 'status', v_job.status);
    end if;
    if v_job.document_id <> p_document_id then
        return jsonb_build_object('ok', false, 'reason', 'document_mismatch', 'job_id', p_job_id);
    end if;
    return null;
end;
$$;
-- squawk-ignore ban-drop-function
drop function public.lock_fenced_ingestion_job(uuid, uuid, text);

create or replace function public.create_import_batch(p_name text, p_metadata jsonb default '{}')
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_batch_id uuid;
begin
    if p_name is null or btrim(p_name) = '' then
        raise exception 'create_import_batch: p_name is required' using errcode = '22023';
    end if;
    insert into public.import_batches (name, metadata) values (p_name, coalesce(p_metadata, '{}'))
    returning id into v_batch_id;
    return jsonb_build_object('ok', true, 'batch_id', v_batch_id);
end;
$$;

-- R9: lock the batch row, then count. A batch with no jobs at all (every file was a
-- duplicate) is complete: nothing is left to do for it.
create or replace function public.refresh_import_batch_status(p_batch_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_total integer;
    v_completed integer;
    v_failed integer;
    v_open integer;
    v_status text;
begin
    perform 1 from public.import_batches where id = p_batch_id for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'batch_not_found');
    end if;

    -- A new statement: in READ COMMITTED it sees every job write committed before the lock.
    select count(*),
           count(*) filter (where status = 'completed'),
           count(*) filter (where status = 'failed'),
           count(*) filter (where status in ('pending', 'processing'))
      into v_total, v_completed, v_failed, v_open
      from public.ingestion_jobs
     where batch_id = p_batch_id;

    v_status := case
        when v_open > 0 then 'processing'
        when v_failed > 0 then 'completed_with_errors'
        else 'completed'
    end;

    update public.import_batches
       set status = v_status,
           total_files = v_total,
           completed_files = v_completed,
           failed_files = v_failed,
           completed_at = case when v_open = 0 then coalesce(completed_at, now()) end,
           updated_at = now()
     where id = p_batch_id;

    return jsonb_build_object('ok', true, 'batch_id', p_batch_id, 'status', v_status,
        'total', v_total, 'completed', v_completed, 'failed', v_failed, 'open', v_open);
end;
$$;

-- Several batches, locked in id order first (no deadlock between overlapping callers).
create or replace function public.refresh_import_batches(p_batch_ids uuid[])
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_results jsonb := '[]'::jsonb;
    v_batch_id uuid;
begin
    perform 1 from public.import_batches where id = any (p_batch_ids) order by id for no key update;
    for v_batch_id in select distinct b from unnest(p_batch_ids) as b where b is not null order by 1 loop
        v_results := v_results || jsonb_build_array(public.refresh_import_batch_status(v_batch_id));
    end loop;
    return v_results;
end;
$$;

-- R17: one open job per document; a second enqueue reports the open one.
create or replace function public.enqueue_ingestion_job(
    p_document_id uuid,
    p_batch_id uuid default null,
    p_kind text default 'index',
    p_max_attempts integer default 3
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_id uuid;
begin
    perform 1 from public.documents where id = p_document_id and deleted_at is null;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'document_not_found');
    end if;

    -- The open job we collide with may finish between the insert and the look-up: retry.
    for attempt in 1..3 loop
        insert into public.ingestion_jobs (document_id, batch_id, kind, max_attempts)
        values (p_document_id, p_batch_id, p_kind, p_max_attempts)
        on conflict (document_id) where status in ('pending', 'processing') do nothing
        returning id into v_job_id;
        if v_job_id is not null then
            exit;
        end if;
        select id into v_job_id from public.ingestion_jobs
         where document_id = p_document_id and status in ('pending', 'processing');
        if v_job_id is not null then
            return jsonb_build_object('ok', false, 'reason', 'already_queued', 'job_id', v_job_id);
        end if;
    end loop;
    if v_job_id is null then
        return jsonb_build_object('ok', false, 'reason', 'contended');
    end if;

    -- R15: an indexed document stays indexed until its new generation commits.
    update public.documents
       set status = case when index_generation_id is null then 'queued' else status end,
           error_message = case when index_generation_id is null then null else error_message end,
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'job_id', v_job_id,
        'batch', case when p_batch_id is not null then public.refresh_import_batch_status(p_batch_id) end);
end;
$$;

-- The claim issues a new fencing token per job and sets the lease deadline from the
-- claimer's window. Reclaim reads the deadline on the row, not the caller's window.
-- New result columns at the end (lease_token, lease_expires_at): older callers that read
-- the columns they know keep working.
-- squawk-ignore ban-drop-function
drop function public.claim_ingestion_jobs(text, integer, integer);
create function public.claim_ingestion_jobs(
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
    committed_generation_id uuid,
    lease_token bigint,
    lease_expires_at timestamptz
)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    if p_worker_id is null or btrim(p_worker_id) = '' then
        raise exception 'claim_ingestion_jobs: p_worker_id is required' using errcode = '22023';
    end if;
    if p_stale_after_seconds is null or p_stale_after_seconds < 1 then
        raise exception 'claim_ingestion_jobs: p_stale_after_seconds must be at least 1' using errcode = '22023';
    end if;

    return query
    -- Two branches, each walking its own partial index in claim order and locking as it
    -- goes, so a claim costs O(limit) however long the backlog.
    with pending as (
        select j.id, j.next_run_at, j.created_at
          from public.ingestion_jobs j
          join public.documents d on d.id = j.document_id
         where j.status = 'pending' and j.next_run_at <= now() and j.attempt_count < j.max_attempts
         order by j.next_run_at, j.created_at
         limit greatest(p_claim_limit, 0)
           for update of j, d skip locked
    ), stale as (
        select j.id, j.next_run_at, j.created_at
          from public.ingestion_jobs j
          join public.documents d on d.id = j.document_id
         where j.status = 'processing'
           and j.lease_expires_at < now()
           -- kept for worker-id callers: a worker id never reclaims its own stale job
           and j.locked_by is distinct from p_worker_id
           and j.attempt_count < j.max_attempts
         order by j.lease_expires_at
         limit greatest(p_claim_limit, 0)
           for update of j, d skip locked
    ), candidates as (
        select c.id from (select * from pending union all select * from stale) c
         order by c.next_run_at, c.created_at
         limit greatest(p_claim_limit, 0)
    ), claimed as (
        update public.ingestion_jobs j
           set status = 'processing',
               stage = 'claimed',
               progress = 0,
               attempt_count = j.attempt_count + 1,
               lease_token = j.lease_token + 1,
               locked_by = p_worker_id,
               locked_at = now(),
               lease_seconds = p_stale_after_seconds,
               lease_expires_at = now() + make_interval(secs => p_stale_after_seconds),
               started_at = coalesce(j.started_at, now()),
               updated_at = now()
          from candidates c
         where j.id = c.id
        returning j.id, j.document_id, j.batch_id, j.kind, j.attempt_count, j.max_attempts,
                  j.locked_by, j.locked_at, j.lease_token, j.lease_expires_at
    ), touched as (
        -- An indexed document stays indexed (and readable) while it is rebuilt.
        update public.documents d
           set status = case when d.index_generation_id is null then 'processing' else d.status end,
               updated_at = now()
          from claimed c
         where d.id = c.document_id
        returning d.id, d.source_name, d.mime_type, d.content_sha256, d.byte_size, d.index_generation_id
    )
    select c.id, c.document_id, c.batch_id, c.kind, c.attempt_count, c.max_attempts,
           c.locked_by, c.locked_at, t.source_name, t.mime_type, t.content_sha256, t.byte_size,
           t.index_generation_id, c.lease_token, c.lease_expires_at
      from claimed c
      join touched t on t.id = c.document_id;
end;
$$;

-- R1: the holder extends its deadline by its window; anyone else learns it lost the lease.
-- squawk-ignore ban-drop-function
drop function public.heartbeat_ingestion_job(uuid, text, integer, text);
create function public.heartbeat_ingestion_job(
    p_job_id uuid,
    p_worker_id text,
    p_progress integer default null,
    p_stage text default null,
    p_lease_token bigint default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_locked_at timestamptz;
    v_expires_at timestamptz;
begin
    update public.ingestion_jobs
       set locked_at = now(),
           lease_expires_at = now() + make_interval(secs => coalesce(lease_seconds, 300)),
           progress = coalesce(least(greatest(p_progress, 0), 100), progress),
           stage = coalesce(p_stage, stage),
           updated_at = now()
     where id = p_job_id and status = 'processing'
       and case when p_lease_token is not null then lease_token = p_lease_token
                else locked_by = p_worker_id end
    returning locked_at, lease_expires_at into v_locked_at, v_expires_at;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'job_id', p_job_id);
    end if;
    return jsonb_build_object('ok', true, 'job_id', p_job_id, 'locked_at', v_locked_at,
        'lease_expires_at', v_expires_at);
end;
$$;

-- Only the holder starts a generation, and the generation remembers the claim (token)
-- that began it: only that claim may write its rows or commit it.
-- squawk-ignore ban-drop-function
drop function public.begin_document_index_generation(uuid, uuid, text);
create function public.begin_document_index_generation(
    p_job_id uuid,
    p_document_id uuid,
    p_worker_id text,
    p_lease_token bigint default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_generation_id uuid;
begin
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    insert into public.index_generations (document_id, job_id, worker_id, lease_token)
    select p_document_id, p_job_id, p_worker_id, j.lease_token
      from public.ingestion_jobs j where j.id = p_job_id
    returning id into v_generation_id;
    return jsonb_build_object('ok', true, 'generation_id', v_generation_id);
end;
$$;

-- R3/R5, count drift: fenced; only the generation this claim began can be committed;
-- counts come from the rows; metadata is merged. The document and generation rows are
-- locked FOR NO KEY UPDATE, which never waits on a writer's foreign-key locks.
-- squawk-ignore ban-drop-function
drop function public.commit_document_index_generation(uuid, uuid, uuid, text, jsonb);
create function public.commit_document_index_generation(
    p_job_id uuid,
    p_document_id uuid,
    p_generation_id uuid,
    p_worker_id text,
    p_metadata jsonb default '{}',
    p_lease_token bigint default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_generation public.index_generations%rowtype;
    v_pages integer;
    v_sections integer;
    v_chunks integer;
begin
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;

    select * into v_generation from public.index_generations
     where id = p_generation_id and document_id = p_document_id
       for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'generation_not_found');
    end if;
    if v_generation.job_id is distinct from p_job_id
       or v_generation.lease_token <> (select j.lease_token from public.ingestion_jobs j where j.id = p_job_id) then
        return jsonb_build_object('ok', false, 'reason', 'generation_not_owned');
    end if;
    if v_generation.status <> 'building' then
        return jsonb_build_object('ok', false, 'reason', 'generation_not_building',
            'status', v_generation.status);
    end if;
    perform 1 from public.documents where id = p_document_id for no key update;

    select count(*) into v_pages from public.document_pages
     where document_id = p_document_id and index_generation_id = p_generation_id;
    select count(*) into v_sections from public.document_sections
     where document_id = p_document_id and index_generation_id = p_generation_id;
    select count(*) into v_chunks from public.document_chunks
     where document_id = p_document_id and index_generation_id = p_generation_id;

    update public.index_generations set status = 'superseded'
     where document_id = p_document_id and status = 'committed';
    update public.index_generations
       set status = 'committed', committed_at = now(),
           page_count = v_pages, section_count = v_sections, chunk_count = v_chunks
     where id = p_generation_id;
    update public.documents
       set index_generation_id = p_generation_id,
           status = 'indexed',
           error_message = null,
           page_count = v_pages, section_count = v_sections, chunk_count = v_chunks,
           title = coalesce(nullif(p_metadata ->> 'title', ''), title),
           metadata = metadata || coalesce(p_metadata, '{}'),
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'generation_id', p_generation_id,
        'page_count', v_pages, 'section_count', v_sections, 'chunk_count', v_chunks);
end;
$$;

-- R2: fenced completion; the lease is released, the token stays.
-- squawk-ignore ban-drop-function
drop function public.complete_ingestion_job(uuid, uuid, uuid, text, text);
create function public.complete_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_batch_id uuid default null,
    p_stage text default 'indexed',
    p_worker_id text default null,
    p_lease_token bigint default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_batches uuid[];
    v_superseded uuid[];
begin
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;

    with done as (
        update public.ingestion_jobs
           set status = 'completed', stage = p_stage, progress = 100, completed_at = now(),
               locked_by = null, locked_at = null, lease_expires_at = null,
               error_message = null, updated_at = now()
         where id = p_job_id
        returning batch_id
    )
    select array_agg(batch_id) into v_batches from done;

    -- Older failed jobs of this document are settled by this success.
    with superseded as (
        update public.ingestion_jobs
           set status = 'completed', stage = 'superseded', completed_at = now(), updated_at = now()
         where document_id = p_document_id and id <> p_job_id and status = 'failed'
        returning batch_id
    )
    select array_agg(batch_id) into v_superseded from superseded;

    update public.documents
       set status = case when index_generation_id is not null then 'indexed' else status end,
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'job_id', p_job_id,
        'batches', public.refresh_import_batches(array[p_batch_id] || v_batches || v_superseded));
end;
$$;

-- Commit the generation and complete the job in one transaction: a document is never
-- indexed under a job that ends failed. The token is required here.
create function public.commit_and_complete_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_generation_id uuid,
    p_lease_token bigint,
    p_metadata jsonb default '{}',
    p_batch_id uuid default null,
    p_stage text default 'indexed'
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_committed jsonb;
    v_completed jsonb;
begin
    if p_lease_token is null then
        raise exception 'commit_and_complete_ingestion_job: p_lease_token is required' using errcode = '22023';
    end if;
    v_committed := public.commit_document_index_generation(
        p_job_id => p_job_id, p_document_id => p_document_id, p_generation_id => p_generation_id,
        p_worker_id => null, p_metadata => p_metadata, p_lease_token => p_lease_token);
    if not (v_committed ->> 'ok')::boolean then
        return v_committed;
    end if;
    -- The job row is locked by this transaction since the commit's fence: this cannot refuse.
    v_completed := public.complete_ingestion_job(
        p_job_id => p_job_id, p_document_id => p_document_id, p_batch_id => p_batch_id,
        p_stage => p_stage, p_worker_id => null, p_lease_token => p_lease_token);
    if not (v_completed ->> 'ok')::boolean then
        raise exception 'commit_and_complete_ingestion_job: completion refused after commit: %', v_completed;
    end if;
    return v_committed || v_completed;
end;
$$;

-- R2, R7, R15: fenced failure or retry; the fence is checked before any write.
-- squawk-ignore ban-drop-function
drop function public.fail_or_retry_ingestion_job(uuid, uuid, uuid, boolean, text, text, text, timestamptz, text);
create function public.fail_or_retry_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_batch_id uuid default null,
    p_retry boolean default false,
    p_document_status text default 'failed',
    p_stage text default 'failed',
    p_error_message text default null,
    p_next_run_at timestamptz default null,
    p_worker_id text default null,
    p_lease_token bigint default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_job public.ingestion_jobs%rowtype;
    v_retry boolean;
begin
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    select * into v_job from public.ingestion_jobs where id = p_job_id;

    -- R7: a retry is granted only while attempts remain (attempts are consumed at claim).
    v_retry := coalesce(p_retry, false) and v_job.attempt_count < v_job.max_attempts;

    update public.ingestion_jobs
       set status = case when v_retry then 'pending' else 'failed' end,
           stage = p_stage,
           next_run_at = case when v_retry then coalesce(p_next_run_at, now()) else next_run_at end,
           completed_at = case when v_retry then null else now() end,
           locked_by = null, locked_at = null, lease_expires_at = null,
           error_message = p_error_message,
           updated_at = now()
     where id = p_job_id;

    -- R15: a document with a committed generation keeps it, and stays readable.
    update public.documents
       set status = case
               when index_generation_id is not null then 'indexed'
               when v_retry then 'queued'
               else p_document_status
           end,
           error_message = case when index_generation_id is not null then error_message else p_error_message end,
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'job_id', p_job_id, 'retried', v_retry,
        'attempts_exhausted', coalesce(p_retry, false) and not v_retry,
        'batches', public.refresh_import_batches(array[p_batch_id, v_job.batch_id]));
end;
$$;

-- Operator retry of a failed job: never a completed job, never a live lease. Attempts
-- start over; the token does not (the next claim still gets a larger one).
create or replace function public.retry_ingestion_job(p_job_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job public.ingestion_jobs%rowtype;
    v_open uuid;
begin
    select * into v_job from public.ingestion_jobs where id = p_job_id for update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found');
    end if;
    if v_job.status = 'completed' then
        return jsonb_build_object('ok', false, 'reason', 'completed');
    end if;
    if v_job.status = 'processing' then
        return jsonb_build_object('ok', false, 'reason', 'lease_live', 'locked_by', v_job.locked_by);
    end if;
    if v_job.status = 'pending' then
        return jsonb_build_object('ok', false, 'reason', 'already_queued', 'job_id', p_job_id);
    end if;
    select id into v_open from public.ingestion_jobs
     where document_id = v_job.document_id and status in ('pending', 'processing');
    if v_open is not null then
        return jsonb_build_object('ok', false, 'reason', 'already_queued', 'job_id', v_open);
    end if;

    begin
        update public.ingestion_jobs
           set status = 'pending', stage = 'queued', progress = 0, attempt_count = 0,
               next_run_at = now(), completed_at = null, error_message = null, updated_at = now()
         where id = p_job_id;
    exception when unique_violation then
        -- an enqueue for the same document committed since the check above
        return jsonb_build_object('ok', false, 'reason', 'already_queued');
    end;
    update public.documents
       set status = case when index_generation_id is null then 'queued' else status end,
           updated_at = now()
     where id = v_job.document_id;

    return jsonb_build_object('ok', true, 'job_id', p_job_id,
        'batches', public.refresh_import_batches(array[v_job.batch_id]));
end;
$$;

-- R7 safety net: a lease past its deadline on a job with no attempts left is
-- dead-lettered. The deadline is on the row; p_stale_after_seconds is kept only so the
-- calls of earlier releases resolve, and is not read.
create or replace function public.expire_stale_ingestion_jobs(p_stale_after_seconds integer default 300)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_ids uuid[];
    v_batches uuid[];
begin
    with stale as (
        select id from public.ingestion_jobs
         where status = 'processing'
           and lease_expires_at < now()
           and attempt_count >= max_attempts
         order by id
           for update skip locked
    ), expired as (
        update public.ingestion_jobs j
           set status = 'failed', stage = 'dead_letter', completed_at = now(),
               locked_by = null, locked_at = null, lease_expires_at = null,
               error_message = coalesce(j.error_message, 'lease expired on the final attempt'),
               updated_at = now()
          from stale
         where j.id = stale.id
        returning j.id, j.document_id, j.batch_id
    ), demoted as (
        update public.documents d
           set status = 'failed', error_message = 'lease expired on the final attempt', updated_at = now()
          from expired e
         where d.id = e.document_id and d.index_generation_id is null
        returning d.id
    )
    select array_agg(id), array_agg(batch_id) into v_job_ids, v_batches from expired;

    return jsonb_build_object('ok', true, 'expired', coalesce(array_length(v_job_ids, 1), 0),
        'job_ids', to_jsonb(coalesce(v_job_ids, '{}')),
        'batches', public.refresh_import_batches(coalesce(v_batches, '{}')));
end;
$$;

-- R23: the "no open job for this document" guard is re-asserted inside every delete.
create or replace function public.cleanup_abandoned_document_index_generations(
    p_document_id uuid default null,
    p_limit integer default 100,
    p_dry_run boolean default true
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_documents uuid[];
    v_pages bigint := 0;
    v_sections bigint := 0;
    v_chunks bigint := 0;
    v_generations bigint := 0;
begin
    select coalesce(array_agg(candidate.document_id), '{}') into v_documents
      from (select distinct g.document_id
              from public.index_generations g
              join public.documents d on d.id = g.document_id
             where g.status <> 'committed'
               and g.id is distinct from d.index_generation_id
               and (p_document_id is null or g.document_id = p_document_id)
               and not exists (select 1 from public.ingestion_jobs j
                                where j.document_id = g.document_id
                                  and j.status in ('pending', 'processing'))
             order by g.document_id
             limit greatest(p_limit, 0)) candidate;

    if p_dry_run then
        select count(*) into v_pages from public.document_pages p join public.documents d on d.id = p.document_id
         where p.document_id = any (v_documents) and p.index_generation_id is distinct from d.index_generation_id;
        select count(*) into v_sections from public.document_sections s join public.documents d on d.id = s.document_id
         where s.document_id = any (v_documents) and s.index_generation_id is distinct from d.index_generation_id;
        select count(*) into v_chunks from public.document_chunks c join public.documents d on d.id = c.document_id
         where c.document_id = any (v_documents) and c.index_generation_id is distinct from d.index_generation_id;
        select count(*) into v_generations from public.index_generations g join public.documents d on d.id = g.document_id
         where g.document_id = any (v_documents) and g.status <> 'committed' and g.id is distinct from d.index_generation_id;
    else
        delete from public.document_pages p using public.documents d
         where d.id = p.document_id and p.document_id = any (v_documents)
           and p.index_generation_id is distinct from d.index_generation_id
           and not exists (select 1 from public.ingestion_jobs j
                            where j.document_id = p.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_pages = row_count;
        delete from public.document_sections s using public.documents d
         where d.id = s.document_id and s.document_id = any (v_documents)
           and s.index_generation_id is distinct from d.index_generation_id
           and not exists (select 1 from public.ingestion_jobs j
                            where j.document_id = s.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_sections = row_count;
        delete from public.document_chunks c using public.documents d
         where d.id = c.document_id and c.document_id = any (v_documents)
           and c.index_generation_id is distinct from d.index_generation_id
           and not exists (select 1 from public.ingestion_jobs j
                            where j.document_id = c.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_chunks = row_count;
        delete from public.index_generations g using public.documents d
         where d.id = g.document_id and g.document_id = any (v_documents)
           and g.status <> 'committed' and g.id is distinct from d.index_generation_id
           and not exists (select 1 from public.ingestion_jobs j
                            where j.document_id = g.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_generations = row_count;
    end if;

    return jsonb_build_object('ok', true, 'dry_run', p_dry_run,
        'documents', coalesce(array_length(v_documents, 1), 0),
        'pages', v_pages, 'sections', v_sections, 'chunks', v_chunks, 'generations', v_generations);
end;
$$;

-- The stage log, fenced like every other write. KEY SHARE: a takeover (FOR UPDATE) waits
-- for this row or this waits for it, while the holder's heartbeat is never blocked. The
-- claim that completed a job may still log the stage that completed it (commit and
-- complete are one call, and its stage row is written after it returns).
-- squawk-ignore ban-drop-function
drop function public.record_ingestion_job_stage(uuid, text, text, timestamptz, timestamptz, jsonb);
create function public.record_ingestion_job_stage(
    p_job_id uuid,
    p_worker_id text,
    p_stage text,
    p_started_at timestamptz,
    p_finished_at timestamptz default now(),
    p_detail jsonb default '{}',
    p_lease_token bigint default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_document_id uuid;
begin
    select document_id into v_document_id from public.ingestion_jobs
     where id = p_job_id
       and case when p_lease_token is not null
                then lease_token = p_lease_token and status in ('processing', 'completed')
                else status = 'processing' and locked_by = p_worker_id end
       for key share;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'job_id', p_job_id);
    end if;
    insert into public.ingestion_job_stages (job_id, document_id, worker_id, stage, started_at, finished_at, detail)
    values (p_job_id, v_document_id, p_worker_id, p_stage, p_started_at, p_finished_at, coalesce(p_detail, '{}'));
    return jsonb_build_object('ok', true);
end;
$$;

create or replace function public.ingestion_batch_report(p_batch_id uuid default null, p_limit integer default 20)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    with chosen as (
        select b.*
          from public.import_batches b
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
          from public.ingestion_jobs j
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
                      from public.ingestion_jobs j
                      join chosen c on c.id = j.batch_id
                      join public.documents d on d.id = j.document_id
                     where j.status = 'failed'
                     order by j.completed_at desc nulls last
                     limit 50) failures), '[]'::jsonb)
    );
$$;

-- Batches the sensor and the janitor heal: those whose jobs are all terminal, and those
-- left `pending` with no job at all for ten minutes (an enqueue that stopped before its
-- first file, or a batch created through the RPC and never filled).
create or replace function public.stuck_import_batch_ids(p_limit integer default 100)
returns setof uuid
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select b.id
      from public.import_batches b
     where b.status in ('pending', 'processing')
       and not exists (select 1 from public.ingestion_jobs j
                        where j.batch_id = b.id and j.status in ('pending', 'processing'))
       and (exists (select 1 from public.ingestion_jobs j where j.batch_id = b.id)
            or (b.status = 'pending' and b.created_at < now() - interval '10 minutes'))
     order by b.id
     limit greatest(p_limit, 1);
$$;

-- One cheap look at the queue for the sensors. Reclaimable means past the deadline on
-- the row; p_stale_after_seconds is kept for earlier callers and not read.
create or replace function public.ingestion_sensor_state(p_stale_after_seconds integer default 300,
                                                         p_limit integer default 100)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select jsonb_build_object(
        'ok', true,
        'claimable', (select count(*) from public.ingestion_jobs
                       where attempt_count < max_attempts
                         and ((status = 'pending' and next_run_at <= now())
                           or (status = 'processing' and lease_expires_at < now()))),
        'pending_later', (select count(*) from public.ingestion_jobs
                           where status = 'pending' and next_run_at > now()),
        'processing', (select count(*) from public.ingestion_jobs where status = 'processing'),
        'stuck_batch_ids', coalesce((select jsonb_agg(id order by id)
                                       from public.stuck_import_batch_ids(p_limit) as id), '[]'::jsonb)
    );
$$;

create or replace function public.refresh_stuck_import_batches(p_limit integer default 100)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_ids uuid[];
begin
    select coalesce(array_agg(id order by id), '{}') into v_ids from public.stuck_import_batch_ids(p_limit) as id;
    return jsonb_build_object('ok', true, 'refreshed', coalesce(array_length(v_ids, 1), 0),
        'batches', public.refresh_import_batches(v_ids));
end;
$$;

-- `ingest health`. Stale leases are those past their deadline on the row.
create or replace function public.ingestion_queue_health(p_stale_after_seconds integer default 300)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select jsonb_build_object(
        'ok', true,
        'jobs_by_status', (select coalesce(jsonb_object_agg(status, n), '{}')
                             from (select status, count(*) as n from public.ingestion_jobs group by status) s),
        'oldest_pending_age_seconds', (select extract(epoch from now() - min(created_at))::bigint
                                         from public.ingestion_jobs where status = 'pending'),
        'stale_leases', (select count(*) from public.ingestion_jobs
                          where status = 'processing' and lease_expires_at < now()),
        'stuck_batches', (select count(*) from public.stuck_import_batch_ids(1000000)),
        'count_mismatches', (select count(*) from public.documents d
                              where d.index_generation_id is not null
                                and (d.page_count, d.section_count, d.chunk_count) is distinct from (
                                    (select count(*) from public.document_pages p
                                      where p.document_id = d.id and p.index_generation_id = d.index_generation_id),
                                    (select count(*) from public.document_sections s
                                      where s.document_id = d.id and s.index_generation_id = d.index_generation_id),
                                    (select count(*) from public.document_chunks c
                                      where c.document_id = d.id and c.index_generation_id = d.index_generation_id))),
        'indexed_without_generation', (select count(*) from public.documents
                                        where status = 'indexed' and index_generation_id is null
                                          and deleted_at is null),
        'generations_awaiting_cleanup', (select count(*) from public.index_generations g
                                          join public.documents d on d.id = g.document_id
                                         where g.status <> 'committed'
                                           and g.id is distinct from d.index_generation_id)
    );
$$;

-- The artifact fence, in the database: rows may be written only into a `building`
-- generation whose job is open and still held by the claim (token) that began it. A
-- committed, superseded or abandoned generation, or one whose claim was taken over,
-- refuses new rows from every role; the table owner can only get past it by disabling
-- the triggers. One check per statement (COPY included), over the statement's new rows.
-- The owning job rows are locked FOR KEY SHARE until the write commits: a takeover or a
-- commit waits for the write (or the write for it), a heartbeat never does.
create function public.enforce_artifact_fence()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refused uuid;
begin
    perform 1
       from public.ingestion_jobs j
      where j.id in (select g.job_id from public.index_generations g
                      where g.id in (select n.index_generation_id from new_rows n))
      order by j.id
        for key share of j;

    select n.index_generation_id into v_refused
      from (select distinct r.document_id, r.index_generation_id from new_rows r) n
      left join public.index_generations g
             on g.id = n.index_generation_id and g.document_id = n.document_id and g.status = 'building'
      left join public.ingestion_jobs j
             on j.id = g.job_id and j.status = 'processing' and j.lease_token = g.lease_token
     where j.id is null
     limit 1;
    if found then
        raise exception 'lease_lost: % rows refused: generation % is not being built under a current lease',
                TG_TABLE_NAME, v_refused
            using errcode = 'IF001',
                  hint = 'Rows are accepted only for a building generation whose job still holds the lease '
                         'of the claim that began it.';
    end if;
    return null;
end;
$$;

create trigger document_pages_artifact_fence
    after insert on public.document_pages referencing new table as new_rows
    for each statement execute function public.enforce_artifact_fence();
create trigger document_sections_artifact_fence
    after insert on public.document_sections referencing new table as new_rows
    for each statement execute function public.enforce_artifact_fence();
create trigger document_chunks_artifact_fence
    after insert on public.document_chunks referencing new table as new_rows
    for each statement execute function public.enforce_artifact_fence();

create or replace function public.secure_rpc(p_function regprocedure, p_worker_may_call boolean default true)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_role text;
begin
    execute format('alter function %s security definer', p_function);
    execute format('revoke all on function %s from public', p_function);
    foreach v_role in array array['anon', 'authenticated'] loop
        if exists (select 1 from pg_roles where rolname = v_role) then
            execute format('revoke all on function %s from %I', p_function, v_role);
        end if;
    end loop;
    if p_worker_may_call then
        execute format('grant execute on function %s to ingestion_worker', p_function);
    end if;
end;
$$;

-- secure_rpc runs only inside migrations, as their owner: nobody else may call it.
-- (The hardening migration revoked it from PUBLIC only, so on Supabase, whose default
-- privileges grant every new function to anon and authenticated, those kept EXECUTE.)
do $$
declare
    v_role text;
begin
    foreach v_role in array array['anon', 'authenticated'] loop
        if exists (select 1 from pg_roles where rolname = v_role) then
            execute format('revoke all on function public.secure_rpc(regprocedure, boolean) from %I', v_role);
        end if;
    end loop;
end;
$$;

-- Grants for the functions created (not replaced) above; internal helpers go to no one.
select public.secure_rpc('public.lock_fenced_ingestion_job(uuid, uuid, text, bigint)', false);
select public.secure_rpc('public.enforce_artifact_fence()', false);
select public.secure_rpc('public.claim_ingestion_jobs(text, integer, integer)');
select public.secure_rpc('public.heartbeat_ingestion_job(uuid, text, integer, text, bigint)');
select public.secure_rpc('public.begin_document_index_generation(uuid, uuid, text, bigint)');
select public.secure_rpc('public.commit_document_index_generation(uuid, uuid, uuid, text, jsonb, bigint)');
select public.secure_rpc('public.complete_ingestion_job(uuid, uuid, uuid, text, text, bigint)');
select public.secure_rpc('public.commit_and_complete_ingestion_job(uuid, uuid, uuid, bigint, jsonb, uuid, text)');
select public.secure_rpc('public.fail_or_retry_ingestion_job(uuid, uuid, uuid, boolean, text, text, text, '
                         'timestamptz, text, bigint)');
select public.secure_rpc('public.record_ingestion_job_stage(uuid, text, text, timestamptz, timestamptz, jsonb, bigint)');
