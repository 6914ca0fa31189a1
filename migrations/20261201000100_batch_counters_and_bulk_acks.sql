-- O(1) batch accounting and bulk acknowledgement (docs/state-machine.md, "Batch counters").
--
-- Until now every job transition ended with refresh_import_batch_status: lock the batch row,
-- then count all of the batch's jobs. The count is what made R9 safe, and what made one
-- completion cost O(batch size) under the one row lock every worker of the batch needs: an
-- import of N files cost O(N^2) (bench/README.md, batch_contention).
--
-- Now the batch row carries counters (total, open, completed, failed), and every transaction
-- that moves a job across those states changes them by a constant-time UPDATE of the batch
-- row, as its last statement. R9 holds through the row lock: a second finisher's UPDATE
-- waits for the first one's commit, then PostgreSQL re-reads the newest row version
-- (EvalPlanQual) and applies its delta to it, so the transaction that brings `open` to 0 is
-- the one that sees it and sets the terminal status. The count under the lock stays, as the
-- repair path (refresh_import_batch_status: janitor, health).
--
-- Bulk acknowledgement: complete_ingestion_jobs and fail_or_retry_ingestion_jobs settle many
-- jobs in one statement, each item fenced by its own lease token and answered on its own;
-- each batch row is touched once per call. heartbeat_ingestion_jobs renews a worker's leases
-- in one statement.
--
-- Expand/contract: every existing signature is kept; the bulk RPCs are new functions.

-- The jobs' writers wait while the counters are filled in, so no transition lands between the
-- count and the new functions (the lock is released at commit; lock_timeout bounds the wait).
lock table public.ingestion_jobs in share mode;

alter table public.import_batches add column open_files integer not null default 0;

-- The one rule for a batch's status, used by the counters, the repair path and the drift check.
create function public.import_batch_status_of(p_open bigint, p_failed bigint)
returns text
language sql
immutable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select case when p_open > 0 then 'processing'
                when p_failed > 0 then 'completed_with_errors'
                else 'completed' end;
$$;

update public.import_batches b
   set total_files = c.total, completed_files = c.completed, failed_files = c.failed, open_files = c.open,
       status = public.import_batch_status_of(c.open, c.failed),
       completed_at = case when c.open > 0 then null else coalesce(b.completed_at, now()) end
  from (select batch_id,
               count(*) as total,
               count(*) filter (where status = 'completed') as completed,
               count(*) filter (where status = 'failed') as failed,
               count(*) filter (where status in ('pending', 'processing')) as open
          from public.ingestion_jobs
         where batch_id is not null
         group by batch_id) c
 where c.batch_id = b.id;

-- One change of a batch's counters (summed per batch before it is applied).
create type public.import_batch_delta as (batch_id uuid, total integer, open integer, completed integer,
                                          failed integer);

-- Apply counter changes: each batch row once, in id order (two callers never lock two batch
-- rows in opposite orders), the last statements of the caller's transaction. A counter never
-- goes below 0 (a drifted counter is for the repair path to fix, not a reason to fail a job).
create function public.move_import_batch_counters(p_deltas public.import_batch_delta[])
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_delta record;
    v_row public.import_batches%rowtype;
    v_results jsonb := '[]'::jsonb;
begin
    for v_delta in
        select d.batch_id, sum(d.total)::integer as total, sum(d.open)::integer as open,
               sum(d.completed)::integer as completed, sum(d.failed)::integer as failed
          from unnest(p_deltas) d
         where d.batch_id is not null
         group by d.batch_id
         order by d.batch_id
    loop
        update public.import_batches b
           set total_files = greatest(b.total_files + v_delta.total, 0),
               open_files = greatest(b.open_files + v_delta.open, 0),
               completed_files = greatest(b.completed_files + v_delta.completed, 0),
               failed_files = greatest(b.failed_files + v_delta.failed, 0),
               status = public.import_batch_status_of(b.open_files + v_delta.open,
                                                      b.failed_files + v_delta.failed),
               completed_at = case when b.open_files + v_delta.open > 0 then null
                                   else coalesce(b.completed_at, now()) end,
               updated_at = now()
         where b.id = v_delta.batch_id
        returning b.* into v_row;
        if found then
            v_results := v_results || jsonb_build_array(jsonb_build_object(
                'ok', true, 'batch_id', v_row.id, 'status', v_row.status, 'total', v_row.total_files,
                'completed', v_row.completed_files, 'failed', v_row.failed_files, 'open', v_row.open_files));
        end if;
    end loop;
    return v_results;
end;
$$;

-- The repair path: lock the batch row, then count (R9), and store counters and status.
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
    -- A transition still in flight has not moved its counters yet (that is its last
    -- statement): it will apply its delta on top of this count when it does.
    select count(*),
           count(*) filter (where status = 'completed'),
           count(*) filter (where status = 'failed'),
           count(*) filter (where status in ('pending', 'processing'))
      into v_total, v_completed, v_failed, v_open
      from public.ingestion_jobs
     where batch_id = p_batch_id;

    v_status := public.import_batch_status_of(v_open, v_failed);

    update public.import_batches
       set status = v_status,
           total_files = v_total,
           completed_files = v_completed,
           failed_files = v_failed,
           open_files = v_open,
           completed_at = case when v_open = 0 then coalesce(completed_at, now()) end,
           updated_at = now()
     where id = p_batch_id;

    return jsonb_build_object('ok', true, 'batch_id', p_batch_id, 'status', v_status,
        'total', v_total, 'completed', v_completed, 'failed', v_failed, 'open', v_open);
end;
$$;

-- Batches whose counters or status disagree with their job rows (one snapshot: counters and
-- rows change in the same transactions, so at head they always agree).
create function public.drifted_import_batch_ids(p_limit integer default 100)
returns setof uuid
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select b.id
      from public.import_batches b
      left join (select j.batch_id,
                        count(*) as total,
                        count(*) filter (where j.status = 'completed') as completed,
                        count(*) filter (where j.status = 'failed') as failed,
                        count(*) filter (where j.status in ('pending', 'processing')) as open
                   from public.ingestion_jobs j
                  where j.batch_id is not null
                  group by j.batch_id) c on c.batch_id = b.id
     where (b.total_files, b.completed_files, b.failed_files, b.open_files)
               is distinct from (coalesce(c.total, 0), coalesce(c.completed, 0), coalesce(c.failed, 0),
                                 coalesce(c.open, 0))
        or (coalesce(c.total, 0) > 0 and b.status is distinct from public.import_batch_status_of(c.open, c.failed))
     order by b.id
     limit greatest(p_limit, 1);
$$;

create function public.refresh_drifted_import_batches(p_limit integer default 100)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_ids uuid[];
begin
    select coalesce(array_agg(id order by id), '{}') into v_ids from public.drifted_import_batch_ids(p_limit) as id;
    return jsonb_build_object('ok', true, 'refreshed', coalesce(array_length(v_ids, 1), 0),
        'batches', public.refresh_import_batches(v_ids));
end;
$$;

-- ---------------------------------------------------------------------------------------
-- The transitions. Each settle_* function does a job's row changes after its fence is held
-- (the caller locked the job row) and returns the counter changes; the RPC applies them last.

-- Complete jobs whose fences the caller holds (one or many, set-based: a bulk
-- acknowledgement settles all its accepted items in three statements).
create function public.settle_completed_ingestion_jobs(p_job_ids uuid[], p_document_ids uuid[], p_stages text[])
returns public.import_batch_delta[]
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_deltas public.import_batch_delta[];
    v_superseded public.import_batch_delta[];
begin
    with done as (
        update public.ingestion_jobs j
           set status = 'completed', stage = coalesce(a.stage, 'indexed'), progress = 100, completed_at = now(),
               locked_by = null, locked_at = null, lease_expires_at = null,
               error_message = null, updated_at = now()
          from unnest(p_job_ids, p_stages) as a(job_id, stage)
         where j.id = a.job_id
        returning j.batch_id
    )
    select array_agg(row(batch_id, 0, -1, 1, 0)::public.import_batch_delta) into v_deltas from done;

    -- Older failed jobs of these documents are settled by this success.
    with superseded as (
        update public.ingestion_jobs
           set status = 'completed', stage = 'superseded', completed_at = now(), updated_at = now()
         where document_id = any (p_document_ids) and status = 'failed' and id <> all (p_job_ids)
        returning batch_id
    )
    select array_agg(row(batch_id, 0, 0, 1, -1)::public.import_batch_delta) into v_superseded from superseded;

    update public.documents
       set status = case when index_generation_id is not null then 'indexed' else status end,
           updated_at = now()
     where id = any (p_document_ids);

    return coalesce(v_deltas, '{}') || coalesce(v_superseded, '{}');
end;
$$;

create or replace function public.complete_ingestion_job(
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
    v_deltas public.import_batch_delta[];
begin
    -- p_batch_id is kept for callers of earlier releases: the counters of the job's own batch move.
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    v_deltas := public.settle_completed_ingestion_jobs(array[p_job_id], array[p_document_id], array[p_stage]);
    return jsonb_build_object('ok', true, 'job_id', p_job_id,
        'batches', public.move_import_batch_counters(v_deltas));
end;
$$;

create function public.settle_failed_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_retry boolean,
    p_document_status text,
    p_stage text,
    p_error_message text,
    p_next_run_at timestamptz,
    p_retry_delay_seconds double precision,
    out retried boolean,
    out deltas public.import_batch_delta[]
)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job public.ingestion_jobs%rowtype;
begin
    if p_retry_delay_seconds is not null and (p_retry_delay_seconds < 0 or p_retry_delay_seconds = 'NaN'::float8
                                              or p_retry_delay_seconds = 'Infinity'::float8) then
        raise exception 'fail_or_retry_ingestion_job: p_retry_delay_seconds must be a finite number >= 0'
            using errcode = '22023';
    end if;
    select * into v_job from public.ingestion_jobs where id = p_job_id;

    -- R7: a retry is granted only while attempts remain (attempts are consumed at claim).
    retried := coalesce(p_retry, false) and v_job.attempt_count < v_job.max_attempts;

    update public.ingestion_jobs
       set status = case when retried then 'pending' else 'failed' end,
           -- a refused retry ends the job: its stage says so, not the caller's retry_wait
           stage = case when coalesce(p_retry, false) and not retried then 'failed'
                        else coalesce(p_stage, 'failed') end,
           next_run_at = case
               when not retried then next_run_at
               when p_retry_delay_seconds is not null then now() + make_interval(secs => p_retry_delay_seconds)
               else coalesce(p_next_run_at, now())
           end,
           completed_at = case when retried then null else now() end,
           locked_by = null, locked_at = null, lease_expires_at = null,
           error_message = p_error_message,
           updated_at = now()
     where id = p_job_id;

    -- R15: a document with a committed generation keeps it, and stays readable.
    update public.documents
       set status = case
               when index_generation_id is not null then 'indexed'
               when retried then 'queued'
               else coalesce(p_document_status, 'failed')
           end,
           error_message = case when index_generation_id is not null then error_message else p_error_message end,
           updated_at = now()
     where id = p_document_id;

    -- A retried job stays open: no counter moves.
    deltas := case when retried then '{}'
                   else array[row(v_job.batch_id, 0, -1, 0, 1)::public.import_batch_delta] end;
end;
$$;

create or replace function public.fail_or_retry_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_batch_id uuid default null,
    p_retry boolean default false,
    p_document_status text default 'failed',
    p_stage text default 'failed',
    p_error_message text default null,
    p_next_run_at timestamptz default null,
    p_worker_id text default null,
    p_lease_token bigint default null,
    p_retry_delay_seconds double precision default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_settled record;
begin
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    v_settled := public.settle_failed_ingestion_job(p_job_id, p_document_id, p_retry, p_document_status, p_stage,
                                                    p_error_message, p_next_run_at, p_retry_delay_seconds);
    return jsonb_build_object('ok', true, 'job_id', p_job_id, 'retried', v_settled.retried,
        'attempts_exhausted', coalesce(p_retry, false) and not v_settled.retried,
        'batches', public.move_import_batch_counters(v_settled.deltas));
end;
$$;

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
    v_batches jsonb;
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

    v_batches := public.move_import_batch_counters(array[row(p_batch_id, 1, 1, 0, 0)::public.import_batch_delta]);
    return jsonb_build_object('ok', true, 'job_id', v_job_id, 'batch', v_batches -> 0);
end;
$$;

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
        'batches', public.move_import_batch_counters(
            array[row(v_job.batch_id, 0, 1, 0, -1)::public.import_batch_delta]));
end;
$$;

create or replace function public.expire_stale_ingestion_jobs(p_stale_after_seconds integer default 300)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_ids uuid[];
    v_deltas public.import_batch_delta[];
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
    select array_agg(id), array_agg(row(batch_id, 0, -1, 0, 1)::public.import_batch_delta)
      into v_job_ids, v_deltas from expired;

    return jsonb_build_object('ok', true, 'expired', coalesce(array_length(v_job_ids, 1), 0),
        'job_ids', to_jsonb(coalesce(v_job_ids, '{}')),
        'batches', public.move_import_batch_counters(coalesce(v_deltas, '{}')));
end;
$$;

-- ---------------------------------------------------------------------------------------
-- Bulk acknowledgement.

-- Complete many jobs: items [{job_id, document_id, lease_token, generation_id?, metadata?,
-- stage?}]. An item with a generation commits it and completes its job in this transaction
-- (as commit_and_complete_ingestion_job); without one it completes the job (as
-- complete_ingestion_job). Each item is fenced by its own token; a refused item changes
-- nothing and the others go on. Jobs are locked in id order. Each answer names its item
-- (`item`: its 1-based position in p_items) and token: two claims of one job in one call
-- (a stalled thread's and a new one's) get their own answers.
create function public.complete_ingestion_jobs(p_items jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_item record;
    v_answer jsonb;
    v_results jsonb := '[]'::jsonb;
    v_job_ids uuid[] := '{}';
    v_document_ids uuid[] := '{}';
    v_stages text[] := '{}';
begin
    if p_items is null or jsonb_typeof(p_items) <> 'array' then
        raise exception 'complete_ingestion_jobs: p_items must be a json array' using errcode = '22023';
    end if;
    for v_item in
        select * from rows from (jsonb_to_recordset(p_items)
                 as (job_id uuid, document_id uuid, lease_token bigint, generation_id uuid, metadata jsonb, stage text))
                 with ordinality as x(job_id, document_id, lease_token, generation_id, metadata, stage, item)
         order by x.job_id, x.item
    loop
        if v_item.job_id is null or v_item.document_id is null or v_item.lease_token is null then
            raise exception 'complete_ingestion_jobs: every item needs job_id, document_id and lease_token'
                using errcode = '22023';
        end if;
        if v_item.generation_id is not null then
            v_answer := public.commit_document_index_generation(
                p_job_id => v_item.job_id, p_document_id => v_item.document_id,
                p_generation_id => v_item.generation_id, p_worker_id => null,
                p_metadata => coalesce(v_item.metadata, '{}'), p_lease_token => v_item.lease_token);
        else
            v_answer := coalesce(public.lock_fenced_ingestion_job(v_item.job_id, v_item.document_id, null,
                                                                  v_item.lease_token),
                                 jsonb_build_object('ok', true));
        end if;
        -- A second item of a job already accepted here is refused: the job is settled once.
        if (v_answer ->> 'ok')::boolean and v_item.job_id = any (v_job_ids) then
            v_answer := jsonb_build_object('ok', false, 'reason', 'lease_lost');
        end if;
        if (v_answer ->> 'ok')::boolean then
            v_job_ids := v_job_ids || v_item.job_id;
            v_document_ids := v_document_ids || v_item.document_id;
            v_stages := v_stages || v_item.stage;
            v_answer := v_answer || jsonb_build_object('committed', v_item.generation_id is not null);
        end if;
        v_results := v_results || jsonb_build_array(v_answer || jsonb_build_object(
            'job_id', v_item.job_id, 'lease_token', v_item.lease_token, 'item', v_item.item));
    end loop;
    -- The accepted items' jobs are locked (their fences held): settle them all at once.
    return jsonb_build_object('ok', true, 'results', v_results,
        'batches', public.move_import_batch_counters(
            public.settle_completed_ingestion_jobs(v_job_ids, v_document_ids, v_stages)));
end;
$$;

-- Fail or retry many jobs: items [{job_id, document_id, lease_token, retry?, error_message?,
-- stage?, document_status?, retry_delay_seconds?}], each as fail_or_retry_ingestion_job.
create function public.fail_or_retry_ingestion_jobs(p_items jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_item record;
    v_refusal jsonb;
    v_settled record;
    v_results jsonb := '[]'::jsonb;
    v_deltas public.import_batch_delta[] := '{}';
begin
    if p_items is null or jsonb_typeof(p_items) <> 'array' then
        raise exception 'fail_or_retry_ingestion_jobs: p_items must be a json array' using errcode = '22023';
    end if;
    for v_item in
        select * from rows from (jsonb_to_recordset(p_items)
                 as (job_id uuid, document_id uuid, lease_token bigint, retry boolean, error_message text,
                     stage text, document_status text, retry_delay_seconds double precision))
                 with ordinality as x(job_id, document_id, lease_token, retry, error_message, stage, document_status,
                                      retry_delay_seconds, item)
         order by x.job_id, x.item
    loop
        if v_item.job_id is null or v_item.document_id is null or v_item.lease_token is null then
            raise exception 'fail_or_retry_ingestion_jobs: every item needs job_id, document_id and lease_token'
                using errcode = '22023';
        end if;
        v_refusal := public.lock_fenced_ingestion_job(v_item.job_id, v_item.document_id, null, v_item.lease_token);
        if v_refusal is not null then
            v_results := v_results || jsonb_build_array(v_refusal || jsonb_build_object(
                'lease_token', v_item.lease_token, 'item', v_item.item));
            continue;
        end if;
        v_settled := public.settle_failed_ingestion_job(
            v_item.job_id, v_item.document_id, v_item.retry, v_item.document_status, v_item.stage,
            v_item.error_message, null, coalesce(v_item.retry_delay_seconds, 0));
        v_deltas := v_deltas || v_settled.deltas;
        v_results := v_results || jsonb_build_array(jsonb_build_object(
            'ok', true, 'job_id', v_item.job_id, 'lease_token', v_item.lease_token, 'item', v_item.item,
            'retried', v_settled.retried,
            'attempts_exhausted', coalesce(v_item.retry, false) and not v_settled.retried));
    end loop;
    return jsonb_build_object('ok', true, 'results', v_results,
        'batches', public.move_import_batch_counters(v_deltas));
end;
$$;

-- Renew many leases in one statement (a worker's heartbeat): each job by its own token;
-- `lost` lists the (job_id, lease_token) pairs not renewed.
-- Rows are locked in id order, as the bulk acknowledgements lock them. Optional stages and
-- progress are per job, in the same order as the ids.
create function public.heartbeat_ingestion_jobs(
    p_job_ids uuid[],
    p_lease_tokens bigint[],
    p_stages text[] default null,
    p_progress integer[] default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_renewed integer;
    v_lost jsonb;
begin
    if coalesce(cardinality(p_job_ids), 0) <> coalesce(cardinality(p_lease_tokens), 0) then
        raise exception 'heartbeat_ingestion_jobs: one lease token per job id' using errcode = '22023';
    end if;
    with wanted as (
        select w.job_id, w.lease_token, w.stage, w.progress
          from unnest(p_job_ids, p_lease_tokens, p_stages, p_progress) as w(job_id, lease_token, stage, progress)
    ), held as (
        select j.id, w.stage, w.progress
          from public.ingestion_jobs j
          join wanted w on w.job_id = j.id and w.lease_token = j.lease_token
         where j.status = 'processing'
         order by j.id
           for no key update of j
    ), renewed as (
        update public.ingestion_jobs j
           set locked_at = now(),
               lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, 300)),
               progress = coalesce(least(greatest(h.progress, 0), 100), j.progress),
               stage = coalesce(h.stage, j.stage),
               updated_at = now()
          from held h
         where j.id = h.id
        returning j.id, j.lease_token
    )
    -- Lost: every (job, token) asked for that was not renewed (two leases of one job, a
    -- stalled thread's and a new claim's, are told apart by their tokens).
    select (select count(*) from renewed),
           coalesce((select jsonb_agg(jsonb_build_object('job_id', w.job_id, 'lease_token', w.lease_token))
                       from unnest(p_job_ids, p_lease_tokens) as w(job_id, lease_token)
                      where not exists (select 1 from renewed r
                                         where r.id = w.job_id and r.lease_token = w.lease_token)), '[]'::jsonb)
      into v_renewed, v_lost;
    return jsonb_build_object('ok', true, 'renewed', v_renewed, 'lost', v_lost);
end;
$$;

-- Health: batches whose counters disagree with their rows.
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
        'batch_counter_drift', (select count(*) from public.drifted_import_batch_ids(1000000)),
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

select public.secure_rpc('public.import_batch_status_of(bigint, bigint)', false);
select public.secure_rpc('public.move_import_batch_counters(public.import_batch_delta[])', false);
select public.secure_rpc('public.settle_completed_ingestion_jobs(uuid[], uuid[], text[])', false);
select public.secure_rpc('public.settle_failed_ingestion_job(uuid, uuid, boolean, text, text, text, timestamptz,'
                         ' double precision)', false);
select public.secure_rpc('public.drifted_import_batch_ids(integer)', false);
select public.secure_rpc('public.refresh_drifted_import_batches(integer)');
select public.secure_rpc('public.complete_ingestion_jobs(jsonb)');
select public.secure_rpc('public.fail_or_retry_ingestion_jobs(jsonb)');
select public.secure_rpc('public.heartbeat_ingestion_jobs(uuid[], bigint[], text[], integer[])');
