-- One lock order everywhere, refusals before effects, no unfenced path (issue 29: a third
-- review's deadlocks and fence holes; docs/state-machine.md, "Lock order").
--
-- THE LOCK ORDER. Every function that changes queue state takes its row locks in these
-- phases, and never goes back to an earlier phase:
--
--   1. job rows, in id order, in one statement (a completion also locks, in this phase, the
--      failed jobs of its documents that it will settle: lock_settling_ingestion_jobs);
--   2. generations, in id order (the one being committed and the one it supersedes);
--   3. documents, in id order;
--   4. batch rows, last, each once, in id order (move_import_batch_counters, or
--      cancel_import_batch_counters for cancellations).
--
-- Every check that can refuse a call or an item runs once the locks it reads under are held
-- and before the first write; effects come last and only touch rows already locked. The
-- functions below point here ("THE LOCK ORDER").
--
-- What this fixes, each with its test (tests/race/test_lock_order_deadlocks.py,
-- test_fence_holes.py, test_cancel_and_retry.py):
--   * retry_failed_ingestion_jobs retried job by job, each moving its batch: batch rows in
--     job-id order, job and document rows between them -> 40P01 against a bulk ack or an
--     enqueue. Now: all jobs, then documents, then batches, one counter move.
--   * a completion settled the document's failed siblings after locking the document, a
--     retry of such a sibling locks the job, then the document -> 40P01. Now the siblings
--     are locked in the job phase.
--   * a retry reopened a cancelled batch (`batch_cancelled` now; left out of selections).
--   * a duplicate item of a bulk ack committed before it was refused (`duplicate_item` now,
--     decided before any write).
--   * a fenced call with neither lease token nor worker id was not fenced at all (22023).
--   * the document status a failing worker asks for was stored unchecked (only `failed`).
--   * a dead-lettered claim wrote stage rows again once its job was completed/superseded
--     (stage rows only under the current lease now).
--   * bulk acks copied their answer per item (quadratic); they take at most 1,000 items.
--   * dead-lettering updated its documents in no particular order (id order now).
--   * cancel_import_batch with nothing open did not mark the batch cancelled.
--   * the janitor's cleanup and drift passes read every document / every batch's jobs even
--     with nothing to do (candidates from partial indexes: …_janitor_indexes.sql).

-- The janitor finds deleted documents whose bytes are still stored through a partial index
-- on this column (…_janitor_indexes.sql) instead of walking every document.
alter table public.documents add column purged_at timestamptz;

update public.documents d set purged_at = d.deleted_at
 where d.deleted_at is not null
   and not exists (select 1 from public.document_sources s where s.document_id = d.id);

-- The most items one bulk acknowledgement takes (the client splits longer lists).
create function public.max_ack_items() returns integer
language sql immutable
set search_path = pg_catalog, pg_temp
as $$ select 1000 $$;

-- A fenced call must say whose lease it acts under.
create function public.require_fence(p_function text, p_worker_id text, p_lease_token bigint) returns void
language plpgsql immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_worker_id is null and p_lease_token is null then
        raise exception '%: a lease token (or, from older workers, a worker id) is required', p_function
            using errcode = '22023',
                  hint = 'Claim the job first (claim_ingestion_jobs) and pass its lease_token.';
    end if;
end;
$$;

-- A worker that gives up on a job may only ask for its document to be `failed` (a retry
-- makes it `queued`); indexing, deleting and cancelling belong to other calls.
create function public.require_failed_document_status(p_function text, p_status text) returns void
language plpgsql immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_status is not null and p_status <> 'failed' then
        raise exception '%: document_status must be ''failed'' (got %)', p_function, quote_literal(p_status)
            using errcode = '22023';
    end if;
end;
$$;

create function public.require_ack_items(p_function text, p_items jsonb) returns void
language plpgsql immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_items is null or jsonb_typeof(p_items) <> 'array' then
        raise exception '%: p_items must be a json array', p_function using errcode = '22023';
    end if;
    if jsonb_array_length(p_items) > public.max_ack_items() then
        raise exception '%: % items, at most % per call', p_function, jsonb_array_length(p_items),
                public.max_ack_items()
            using errcode = '22023', hint = 'Split the acknowledgement into calls of at most that many items.';
    end if;
end;
$$;

-- THE LOCK ORDER, phase 1: the jobs, and the failed jobs of their documents that a completion
-- settles (completed/superseded), all in id order in one statement. The siblings found here
-- cannot change while the caller's open job holds its document: a retry of one is refused
-- (`already_queued`) and no other job of the document can fail.
create function public.lock_settling_ingestion_jobs(p_job_ids uuid[]) returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    perform 1 from public.ingestion_jobs j
     where j.id in (select wanted.id from unnest(p_job_ids) as wanted(id)
                    union
                    select sibling.id
                      from public.ingestion_jobs own
                      join public.ingestion_jobs sibling
                        on sibling.document_id = own.document_id and sibling.status = 'failed'
                     where own.id = any (p_job_ids))
     order by j.id
       for update of j;
end;
$$;

-- The fence on a job row this transaction has locked: null when the caller holds the lease.
create function public.fence_refusal(p_job public.ingestion_jobs, p_job_id uuid, p_document_id uuid,
                                     p_worker_id text, p_lease_token bigint) returns jsonb
language sql stable
set search_path = pg_catalog, pg_temp
as $$
    select case
        when p_job.id is null then jsonb_build_object('ok', false, 'reason', 'not_found', 'job_id', p_job_id)
        when p_job.status <> 'processing'
          or (p_lease_token is not null and p_job.lease_token <> p_lease_token)
          or (p_lease_token is null and p_job.locked_by is distinct from p_worker_id)
            then jsonb_build_object('ok', false, 'reason', 'lease_lost', 'job_id', p_job_id)
        when p_job.document_id <> p_document_id
            then jsonb_build_object('ok', false, 'reason', 'document_mismatch', 'job_id', p_job_id)
    end;
$$;

create or replace function public.lock_fenced_ingestion_job(p_job_id uuid, p_document_id uuid, p_worker_id text,
                                                            p_lease_token bigint)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job public.ingestion_jobs%rowtype;
begin
    perform public.require_fence('fenced call', p_worker_id, p_lease_token);
    select * into v_job from public.ingestion_jobs where id = p_job_id for update;
    return public.fence_refusal(v_job, p_job_id, p_document_id, p_worker_id, p_lease_token);
end;
$$;

-- THE LOCK ORDER, phase 2: the generation a commit makes current and the committed one it
-- supersedes, for each document, in id order.
create function public.lock_commit_generations(p_document_ids uuid[], p_generation_ids uuid[]) returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    perform 1 from public.index_generations g
     where g.id in (select wanted.id from unnest(p_generation_ids) as wanted(id)
                    union
                    select c.id from public.index_generations c
                     where c.document_id = any (p_document_ids) and c.status = 'committed')
     order by g.id
       for no key update of g;
end;
$$;

-- THE LOCK ORDER, phase 3.
create function public.lock_documents(p_document_ids uuid[]) returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    perform 1 from public.documents d where d.id = any (p_document_ids) order by d.id for no key update;
end;
$$;

-- Why a generation may not be committed by this job's current claim (null: it may). Read
-- under the phase-2 lock.
create function public.generation_refusal(p_job_id uuid, p_document_id uuid, p_generation_id uuid) returns jsonb
language sql stable
set search_path = pg_catalog, pg_temp
as $$
    select case
        when g.id is null then jsonb_build_object('ok', false, 'reason', 'generation_not_found')
        when g.job_id is distinct from p_job_id or g.lease_token is distinct from j.lease_token
            then jsonb_build_object('ok', false, 'reason', 'generation_not_owned')
        when g.status <> 'building'
            then jsonb_build_object('ok', false, 'reason', 'generation_not_building', 'status', g.status)
    end
      from (select 1) one
      left join public.index_generations g on g.id = p_generation_id and g.document_id = p_document_id
      left join public.ingestion_jobs j on j.id = p_job_id;
$$;

-- The commit's writes, once phases 1-3 hold the job, the generations and the document: counts
-- from the rows themselves, the previous generation superseded, the pointer swapped,
-- metadata merged.
create function public.apply_generation_commit(p_document_id uuid, p_generation_id uuid, p_metadata jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_pages integer;
    v_sections integer;
    v_chunks integer;
begin
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

create or replace function public.commit_document_index_generation(p_job_id uuid, p_document_id uuid,
                                                                   p_generation_id uuid, p_worker_id text,
                                                                   p_metadata jsonb default '{}',
                                                                   p_lease_token bigint default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
begin
    -- THE LOCK ORDER: the job, the generations, the document.
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    perform public.lock_commit_generations(array[p_document_id], array[p_generation_id]);
    v_refusal := public.generation_refusal(p_job_id, p_document_id, p_generation_id);
    if v_refusal is not null then
        return v_refusal;
    end if;
    perform public.lock_documents(array[p_document_id]);
    return public.apply_generation_commit(p_document_id, p_generation_id, p_metadata);
end;
$$;

create or replace function public.complete_ingestion_job(p_job_id uuid, p_document_id uuid,
                                                         p_batch_id uuid default null,
                                                         p_stage text default 'indexed',
                                                         p_worker_id text default null,
                                                         p_lease_token bigint default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
begin
    -- p_batch_id is kept for callers of earlier releases: the counters of the job's own batch move.
    perform public.require_fence('complete_ingestion_job', p_worker_id, p_lease_token);
    -- THE LOCK ORDER: the job and the failed siblings it settles, the document, the batches.
    perform public.lock_settling_ingestion_jobs(array[p_job_id]);
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    perform public.lock_documents(array[p_document_id]);
    return jsonb_build_object('ok', true, 'job_id', p_job_id,
        'batches', public.move_import_batch_counters(
            public.settle_completed_ingestion_jobs(array[p_job_id], array[p_document_id], array[p_stage])));
end;
$$;

-- The bulk completion, in the phases of THE LOCK ORDER. Items are taken in (job id, position)
-- order; every refusal (fence, generation, a second item of a job already accepted) is
-- decided before the first write, so an answer says exactly what happened. Linear in the
-- items: answers are kept by position in an array and returned once.
create or replace function public.complete_ingestion_jobs(p_items jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_ids uuid[];
    v_document_ids uuid[];
    v_tokens bigint[];
    v_generation_ids uuid[];
    v_metadata jsonb[];
    v_stages text[];
    v_worker_ids text[];
    v_stage_rows jsonb[];
    v_positions integer[];
    v_answers jsonb[];
    v_accepted boolean[];
    v_refusal jsonb;
    v_last_accepted uuid;
    v_commit_began timestamptz;
    v_job public.ingestion_jobs%rowtype;
    v_count integer;
    v_missing integer;
begin
    perform public.require_ack_items('complete_ingestion_jobs', p_items);
    select coalesce(array_agg(x.job_id order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.document_id order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.lease_token order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.generation_id order by x.job_id, x.item), '{}'),
           coalesce(array_agg(coalesce(x.metadata, '{}') order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.stage order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.worker_id order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.stages order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.item::integer order by x.job_id, x.item), '{}'),
           count(*) filter (where x.job_id is null or x.document_id is null or x.lease_token is null)
      into v_job_ids, v_document_ids, v_tokens, v_generation_ids, v_metadata, v_stages, v_worker_ids,
           v_stage_rows, v_positions, v_missing
      from rows from (jsonb_to_recordset(p_items)
               as (job_id uuid, document_id uuid, lease_token bigint, generation_id uuid, metadata jsonb,
                   stage text, worker_id text, stages jsonb))
               with ordinality as x(job_id, document_id, lease_token, generation_id, metadata, stage, worker_id,
                                    stages, item);
    if v_missing > 0 then
        raise exception 'complete_ingestion_jobs: every item needs job_id, document_id and lease_token'
            using errcode = '22023';
    end if;
    v_count := cardinality(v_job_ids);
    v_answers := array_fill(null::jsonb, array[v_count]);
    v_accepted := array_fill(false, array[v_count]);

    -- Phase 1: every item's job, and the failed siblings the completions settle.
    perform public.lock_settling_ingestion_jobs(v_job_ids);
    for i in 1..v_count loop
        select * into v_job from public.ingestion_jobs where id = v_job_ids[i];
        v_answers[v_positions[i]] := public.fence_refusal(v_job, v_job_ids[i], v_document_ids[i], null, v_tokens[i]);
        v_accepted[i] := v_answers[v_positions[i]] is null;
    end loop;

    -- Phase 2: the generations of the items that hold their lease (and those they supersede).
    perform public.lock_commit_generations(
        array(select v_document_ids[i] from generate_subscripts(v_job_ids, 1) i
               where v_accepted[i] and v_generation_ids[i] is not null),
        array(select v_generation_ids[i] from generate_subscripts(v_job_ids, 1) i
               where v_accepted[i] and v_generation_ids[i] is not null));
    for i in 1..v_count loop
        continue when not v_accepted[i];
        v_refusal := case when v_job_ids[i] = v_last_accepted
                          then jsonb_build_object('ok', false, 'reason', 'duplicate_item', 'job_id', v_job_ids[i])
                          when v_generation_ids[i] is not null
                          then public.generation_refusal(v_job_ids[i], v_document_ids[i], v_generation_ids[i]) end;
        if v_refusal is not null then
            v_answers[v_positions[i]] := v_refusal;
            v_accepted[i] := false;
        else
            v_last_accepted := v_job_ids[i];
        end if;
    end loop;

    -- Phase 3: the documents of the accepted items. Then the writes, every row already locked.
    perform public.lock_documents(array(select v_document_ids[i] from generate_subscripts(v_job_ids, 1) i
                                         where v_accepted[i]));
    for i in 1..v_count loop
        continue when not v_accepted[i];
        v_commit_began := clock_timestamp();
        v_answers[v_positions[i]] := case
            when v_generation_ids[i] is null then jsonb_build_object('ok', true, 'committed', false)
            else public.apply_generation_commit(v_document_ids[i], v_generation_ids[i], v_metadata[i])
                 || jsonb_build_object('committed', true) end;
        if v_stage_rows[i] is not null then
            if v_generation_ids[i] is not null then
                v_stage_rows[i] := v_stage_rows[i] || jsonb_build_array(jsonb_build_object(
                    'stage', 'commit', 'started_at', v_commit_began, 'finished_at', clock_timestamp(),
                    'detail', jsonb_build_object('seconds', round(extract(epoch from
                        clock_timestamp() - v_commit_began)::numeric, 4), 'completes_job', true)));
            end if;
            perform public.insert_ingestion_job_stages(v_job_ids[i], v_document_ids[i], v_worker_ids[i],
                                                       v_stage_rows[i]);
        end if;
    end loop;
    for i in 1..v_count loop
        v_answers[v_positions[i]] := v_answers[v_positions[i]] || jsonb_build_object(
            'job_id', v_job_ids[i], 'lease_token', v_tokens[i], 'item', v_positions[i]);
    end loop;

    -- The accepted items' jobs settled at once; phase 4: the batch rows, once each, last.
    return jsonb_build_object('ok', true, 'results', to_jsonb(v_answers),
        'batches', public.move_import_batch_counters(public.settle_completed_ingestion_jobs(
            array(select v_job_ids[i] from generate_subscripts(v_job_ids, 1) i where v_accepted[i]),
            array(select v_document_ids[i] from generate_subscripts(v_job_ids, 1) i where v_accepted[i]),
            array(select v_stages[i] from generate_subscripts(v_job_ids, 1) i where v_accepted[i]))));
end;
$$;

-- One commit-and-complete is a bulk completion of one item: one implementation of the phases.
create or replace function public.commit_and_complete_ingestion_job(p_job_id uuid, p_document_id uuid,
                                                                    p_generation_id uuid, p_lease_token bigint,
                                                                    p_metadata jsonb default '{}',
                                                                    p_batch_id uuid default null,
                                                                    p_stage text default 'indexed')
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_answer jsonb;
begin
    if p_lease_token is null then
        raise exception 'commit_and_complete_ingestion_job: p_lease_token is required' using errcode = '22023';
    end if;
    -- p_batch_id is kept for callers of earlier releases: the counters of the job's own batch move.
    v_answer := public.complete_ingestion_jobs(jsonb_build_array(jsonb_build_object(
        'job_id', p_job_id, 'document_id', p_document_id, 'lease_token', p_lease_token,
        'generation_id', p_generation_id, 'metadata', coalesce(p_metadata, '{}'), 'stage', p_stage)));
    return (v_answer -> 'results' -> 0) - 'item' || jsonb_build_object('batches', v_answer -> 'batches');
end;
$$;

create or replace function public.settle_failed_ingestion_job(p_job_id uuid, p_document_id uuid, p_retry boolean,
                                                              p_document_status text, p_stage text,
                                                              p_error_message text, p_next_run_at timestamptz,
                                                              p_retry_delay_seconds double precision,
                                                              out retried boolean,
                                                              out deltas public.import_batch_delta[])
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job public.ingestion_jobs%rowtype;
begin
    perform public.require_failed_document_status('fail_or_retry_ingestion_job', p_document_status);
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
               else 'failed'
           end,
           error_message = case when index_generation_id is not null then error_message else p_error_message end,
           updated_at = now()
     where id = p_document_id;

    -- A retried job stays open: no counter moves.
    deltas := case when retried then '{}'
                   else array[row(v_job.batch_id, 0, -1, 0, 1)::public.import_batch_delta] end;
end;
$$;

create or replace function public.fail_or_retry_ingestion_job(p_job_id uuid, p_document_id uuid,
                                                              p_batch_id uuid default null,
                                                              p_retry boolean default false,
                                                              p_document_status text default 'failed',
                                                              p_stage text default 'failed',
                                                              p_error_message text default null,
                                                              p_next_run_at timestamptz default null,
                                                              p_worker_id text default null,
                                                              p_lease_token bigint default null,
                                                              p_retry_delay_seconds double precision default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_settled record;
begin
    perform public.require_failed_document_status('fail_or_retry_ingestion_job', p_document_status);
    -- THE LOCK ORDER: the job, the document (settle_failed_ingestion_job), the batch.
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

-- The bulk failure, in the phases of THE LOCK ORDER (no generation phase: nothing is
-- committed). Validation first (a bad document status refuses the whole call), then every
-- item's fence and duplicate check, then the writes; linear in the items.
create or replace function public.fail_or_retry_ingestion_jobs(p_items jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_item record;
    v_job public.ingestion_jobs%rowtype;
    v_answers jsonb[];
    v_refusal jsonb;
    v_last_accepted uuid;
    v_settled record;
    v_deltas public.import_batch_delta[] := '{}';
    v_bad_status text;
begin
    perform public.require_ack_items('fail_or_retry_ingestion_jobs', p_items);
    if exists (select 1 from jsonb_to_recordset(p_items) as x(job_id uuid, document_id uuid, lease_token bigint)
                where x.job_id is null or x.document_id is null or x.lease_token is null) then
        raise exception 'fail_or_retry_ingestion_jobs: every item needs job_id, document_id and lease_token'
            using errcode = '22023';
    end if;
    select x.document_status into v_bad_status
      from jsonb_to_recordset(p_items) as x(document_status text)
     where x.document_status is distinct from 'failed' and x.document_status is not null
     limit 1;
    perform public.require_failed_document_status('fail_or_retry_ingestion_jobs', v_bad_status);
    v_answers := array_fill(null::jsonb, array[jsonb_array_length(p_items)]);

    -- Phase 1: the jobs. Then each item's fence; a second item of an accepted job is refused.
    perform 1 from public.ingestion_jobs j
     where j.id in (select x.job_id from jsonb_to_recordset(p_items) as x(job_id uuid))
     order by j.id
       for update of j;
    for v_item in
        select x.job_id, x.document_id, x.lease_token, x.item::integer as item
          from rows from (jsonb_to_recordset(p_items) as (job_id uuid, document_id uuid, lease_token bigint))
               with ordinality as x(job_id, document_id, lease_token, item)
         order by x.job_id, x.item
    loop
        select * into v_job from public.ingestion_jobs where id = v_item.job_id;
        v_refusal := coalesce(
            public.fence_refusal(v_job, v_item.job_id, v_item.document_id, null, v_item.lease_token),
            case when v_item.job_id = v_last_accepted
                 then jsonb_build_object('ok', false, 'reason', 'duplicate_item', 'job_id', v_item.job_id) end);
        if v_refusal is null then
            v_last_accepted := v_item.job_id;
            v_answers[v_item.item] := jsonb_build_object('ok', true);
        else
            v_answers[v_item.item] := v_refusal;
        end if;
    end loop;

    -- Phase 3: the documents of the accepted items; then the writes.
    perform public.lock_documents(array(
        select x.document_id from rows from (jsonb_to_recordset(p_items) as (document_id uuid))
               with ordinality as x(document_id, item)
         where (v_answers[x.item::integer] ->> 'ok')::boolean));
    for v_item in
        select x.*, x.item::integer as position
          from rows from (jsonb_to_recordset(p_items)
                   as (job_id uuid, document_id uuid, lease_token bigint, retry boolean, error_message text,
                       stage text, document_status text, retry_delay_seconds double precision, worker_id text,
                       stages jsonb))
               with ordinality as x(job_id, document_id, lease_token, retry, error_message, stage,
                                    document_status, retry_delay_seconds, worker_id, stages, item)
         order by x.job_id, x.item
    loop
        if (v_answers[v_item.position] ->> 'ok')::boolean then
            if v_item.stages is not null then
                perform public.insert_ingestion_job_stages(v_item.job_id, v_item.document_id, v_item.worker_id,
                                                           v_item.stages);
            end if;
            v_settled := public.settle_failed_ingestion_job(
                v_item.job_id, v_item.document_id, v_item.retry, v_item.document_status, v_item.stage,
                v_item.error_message, null, coalesce(v_item.retry_delay_seconds, 0));
            if cardinality(v_settled.deltas) > 0 then
                v_deltas := array_append(v_deltas, v_settled.deltas[1]);  -- in place: linear
            end if;
            v_answers[v_item.position] := jsonb_build_object('ok', true, 'retried', v_settled.retried,
                'attempts_exhausted', coalesce(v_item.retry, false) and not v_settled.retried);
        end if;
        v_answers[v_item.position] := v_answers[v_item.position] || jsonb_build_object(
            'job_id', v_item.job_id, 'lease_token', v_item.lease_token, 'item', v_item.position);
    end loop;

    -- Phase 4: the batch rows, once each, last.
    return jsonb_build_object('ok', true, 'results', to_jsonb(v_answers),
        'batches', public.move_import_batch_counters(v_deltas));
end;
$$;

-- Stage rows only from the current lease: a job that is no longer `processing` under this
-- token (completed, superseded, failed, dead-lettered, cancelled, taken over) takes none.
-- The stage that completes a job rides its acknowledgement instead.
create or replace function public.record_ingestion_job_stage(p_job_id uuid, p_worker_id text, p_stage text,
                                                             p_started_at timestamptz,
                                                             p_finished_at timestamptz default now(),
                                                             p_detail jsonb default '{}',
                                                             p_lease_token bigint default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_document_id uuid;
begin
    select document_id into v_document_id from public.ingestion_jobs
     where id = p_job_id and status = 'processing'
       and case when p_lease_token is not null then lease_token = p_lease_token
                else locked_by = p_worker_id end
       for key share;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'job_id', p_job_id);
    end if;
    insert into public.ingestion_job_stages (job_id, document_id, worker_id, stage, started_at, finished_at, detail)
    values (p_job_id, v_document_id, p_worker_id, p_stage, p_started_at, p_finished_at, coalesce(p_detail, '{}'));
    return jsonb_build_object('ok', true);
end;
$$;

-- The operator's retry, in the phases of THE LOCK ORDER: every chosen job, then their
-- documents, then their batch rows (locked before deciding, so a cancel in flight is waited
-- for and seen), then the decisions, then the writes and one counter move. A job of a
-- cancelled batch is refused (`batch_cancelled`); the batch and "every failed job" forms
-- never choose one.
create or replace function public.retry_failed_ingestion_jobs(p_job_ids uuid[] default null,
                                                              p_batch_id uuid default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_chosen uuid[];
    v_retried uuid[];
    v_refused jsonb;
    v_deltas public.import_batch_delta[];
begin
    -- Read without locks; everything is decided again below, under them.
    v_chosen := array(
        select j.id from public.ingestion_jobs j
         where (p_job_ids is not null and j.id = any (p_job_ids))
            or (p_job_ids is null and j.status = 'failed'
                and (p_batch_id is null or j.batch_id = p_batch_id)
                and exists (select 1 from public.documents d where d.id = j.document_id and d.deleted_at is null)
                and not exists (select 1 from public.import_batches b
                                 where b.id = j.batch_id and b.cancelled_at is not null))
         order by j.id);

    perform 1 from public.ingestion_jobs j where j.id = any (v_chosen) order by j.id for update of j;
    perform public.lock_documents(array(select j.document_id from public.ingestion_jobs j
                                         where j.id = any (v_chosen)));
    perform 1 from public.import_batches b
     where b.id in (select j.batch_id from public.ingestion_jobs j where j.id = any (v_chosen))
     order by b.id
       for no key update of b;

    with decided as (
        select j.id, j.document_id, j.batch_id,
               case when j.status = 'completed' then 'completed'
                    when j.status = 'processing' then 'lease_live'
                    when j.status = 'pending' then 'already_queued'
                    when j.status = 'cancelled' then 'cancelled'
                    when d.deleted_at is not null then 'document_deleted'
                    when b.cancelled_at is not null then 'batch_cancelled'
                    when exists (select 1 from public.ingestion_jobs o
                                  where o.document_id = j.document_id and o.status in ('pending', 'processing'))
                        then 'already_queued'
               end as reason
          from public.ingestion_jobs j
          join public.documents d on d.id = j.document_id
          left join public.import_batches b on b.id = j.batch_id
         where j.id = any (v_chosen)
    ), one_per_document as (
        -- Two failed jobs of one document: the oldest id is retried, the other is queued behind it.
        select dd.id, dd.batch_id,
               case when dd.reason is null
                         and row_number() over (partition by dd.document_id, dd.reason is null order by dd.id) > 1
                    then 'already_queued' else dd.reason end as reason
          from decided dd
    )
    select coalesce(array_agg(o.id order by o.id) filter (where o.reason is null), '{}'),
           coalesce(jsonb_agg(jsonb_build_object('job_id', o.id, 'reason', o.reason) order by o.id)
                        filter (where o.reason is not null), '[]'::jsonb),
           coalesce(array_agg(row(o.batch_id, 0, 1, 0, -1)::public.import_batch_delta) filter (where o.reason is null),
                    '{}')
      into v_retried, v_refused, v_deltas
      from one_per_document o;

    update public.ingestion_jobs
       set status = 'pending', stage = 'queued', progress = 0, attempt_count = 0,
           next_run_at = now(), completed_at = null, error_message = null, updated_at = now()
     where id = any (v_retried);
    update public.documents d
       set status = case when d.index_generation_id is null then 'queued' else d.status end,
           updated_at = now()
     where d.id in (select j.document_id from public.ingestion_jobs j where j.id = any (v_retried));

    -- Ids that name no job at all.
    if p_job_ids is not null then
        select v_refused || coalesce(jsonb_agg(jsonb_build_object('job_id', missing, 'reason', 'not_found')
                                               order by missing), '[]'::jsonb)
          into v_refused
          from unnest(p_job_ids) as missing
         where missing <> all (v_chosen);
    end if;
    return jsonb_build_object('ok', true, 'retried', cardinality(v_retried), 'job_ids', to_jsonb(v_retried),
                              'refused', v_refused, 'batches', public.move_import_batch_counters(v_deltas));
end;
$$;

-- One job's retry is the bulk retry of one job: one implementation of the phases and refusals.
create or replace function public.retry_ingestion_job(p_job_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_answer jsonb;
begin
    v_answer := public.retry_failed_ingestion_jobs(array[p_job_id], null);
    if (v_answer ->> 'retried')::integer = 1 then
        return jsonb_build_object('ok', true, 'job_id', p_job_id, 'batches', v_answer -> 'batches');
    end if;
    return jsonb_build_object('ok', false) || (v_answer -> 'refused' -> 0);
end;
$$;

-- Cancelling locked jobs: phases 2 and 3 of THE LOCK ORDER (their building generations, then
-- their documents, in id order); the caller holds the jobs and moves the batch rows last.
create or replace function public.cancel_locked_ingestion_jobs(p_job_ids uuid[], p_reason text,
                                                               p_document_status text default 'cancelled')
returns table (batch_id uuid, cancelled integer)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    perform 1 from public.index_generations g
     where g.job_id = any (p_job_ids) and g.status = 'building'
     order by g.id
       for no key update;
    perform public.lock_documents(array(select j.document_id from public.ingestion_jobs j
                                         where j.id = any (p_job_ids)));
    update public.index_generations g set status = 'abandoned'
     where g.job_id = any (p_job_ids) and g.status = 'building';
    -- R15: a document with a committed generation keeps it (and stays `indexed`).
    update public.documents d
       set status = p_document_status, updated_at = now()
      from public.ingestion_jobs j
     where j.id = any (p_job_ids) and d.id = j.document_id
       and d.index_generation_id is null and d.deleted_at is null;
    return query
    with cancelled as (
        update public.ingestion_jobs j
           set status = 'cancelled', stage = 'cancelled', completed_at = now(), error_message = p_reason,
               lease_expires_at = null, updated_at = now()
         where j.id = any (p_job_ids) and j.status in ('pending', 'processing')
        returning j.batch_id
    )
    select c.batch_id, count(*)::integer from cancelled c group by c.batch_id order by c.batch_id;
end;
$$;

-- A cancel marks the batch cancelled even when nothing of it is open, so a folder still being
-- enqueued after all its jobs finished is stopped too (its next enqueue raises IF002).
create or replace function public.cancel_import_batch(p_batch_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_ids uuid[];
    v_in_flight integer;
    v_cancelled integer;
    v_batch jsonb;
begin
    perform 1 from public.import_batches where id = p_batch_id;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'batch_not_found', 'batch_id', p_batch_id);
    end if;
    -- THE LOCK ORDER. The open jobs first (a claim holding one is waited for, then its job is cancelled).
    select coalesce(array_agg(id order by id), '{}'), count(*) filter (where status = 'processing')
      into v_job_ids, v_in_flight
      from (select id, status from public.ingestion_jobs
             where batch_id = p_batch_id and status in ('pending', 'processing')
             order by id
               for no key update) open_jobs;
    select coalesce(sum(c.cancelled), 0) into v_cancelled
      from public.cancel_locked_ingestion_jobs(v_job_ids, 'import batch cancelled') c;
    v_batch := public.cancel_import_batch_counters(p_batch_id, v_cancelled, true);
    return jsonb_build_object('ok', true, 'batch_id', p_batch_id, 'cancelled', v_cancelled,
        'in_flight', v_in_flight, 'job_ids', to_jsonb(v_job_ids), 'nothing_open', cardinality(v_job_ids) = 0,
        'status', v_batch ->> 'status', 'batch', v_batch);
end;
$$;

create or replace function public.delete_document(p_document_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_document public.documents%rowtype;
    v_job public.ingestion_jobs%rowtype;
    v_open_now uuid;
    v_settled boolean := false;
    v_in_flight boolean;
    v_batch jsonb;
begin
    -- THE LOCK ORDER: the open job, the generations, the document, the batch last.
    for attempt in 1..5 loop
        begin
            select * into v_job from public.ingestion_jobs
             where document_id = p_document_id and status in ('pending', 'processing')
               for no key update;
            perform 1 from public.index_generations
             where document_id = p_document_id and status in ('building', 'committed')
             order by id
               for no key update;
            select * into v_document from public.documents where id = p_document_id for no key update;
            -- An enqueue in flight when we looked for the open job has committed by now (its
            -- lock on the document is what we waited for). Locking its job now would take a
            -- job after a document: undo this attempt's locks (the block's subtransaction)
            -- and start again, the new job in sight.
            select id into v_open_now from public.ingestion_jobs
             where document_id = p_document_id and status in ('pending', 'processing');
            if v_open_now is distinct from v_job.id then
                raise exception 'open job changed' using errcode = 'IF003';
            end if;
            v_settled := true;
            exit;
        exception when sqlstate 'IF003' then
            v_job := null;
        end;
    end loop;
    if not v_settled then
        return jsonb_build_object('ok', false, 'reason', 'contended', 'document_id', p_document_id);
    end if;
    if v_document.id is null then
        return jsonb_build_object('ok', false, 'reason', 'not_found', 'document_id', p_document_id);
    end if;
    if v_document.deleted_at is not null then
        return jsonb_build_object('ok', false, 'reason', 'already_deleted', 'document_id', p_document_id,
                                  'deleted_at', v_document.deleted_at);
    end if;

    v_in_flight := v_job.id is not null and v_job.status = 'processing';
    if v_job.id is not null then
        perform public.cancel_locked_ingestion_jobs(array[v_job.id], 'document deleted');
    end if;
    update public.index_generations set status = 'abandoned'
     where document_id = p_document_id and status in ('building', 'committed');
    update public.documents
       set deleted_at = now(), status = 'deleted', index_generation_id = null,
           page_count = 0, section_count = 0, chunk_count = 0, updated_at = now(),
           purged_at = case when v_in_flight then null else now() end
     where id = p_document_id;

    -- Nothing in flight: nobody writes its rows, so they go now. Otherwise the building
    -- worker's transaction may still hold them: the guarded cleanup removes them once it ended.
    if not v_in_flight then
        delete from public.document_pages where document_id = p_document_id;
        delete from public.document_sections where document_id = p_document_id;
        delete from public.document_chunks where document_id = p_document_id;
        delete from public.index_generations where document_id = p_document_id;
        delete from public.document_sources where document_id = p_document_id;
    end if;

    if v_job.id is not null then
        v_batch := public.cancel_import_batch_counters(v_job.batch_id, 1);
    end if;
    return jsonb_build_object('ok', true, 'document_id', p_document_id, 'source_name', v_document.source_name,
        'cancelled_job_id', v_job.id, 'in_flight', v_in_flight, 'purged', not v_in_flight, 'batch', v_batch);
end;
$$;

-- The janitor's cleanup costs what it finds: its candidates come from two partial indexes
-- (generations that are not committed; deleted documents whose bytes are still stored:
-- …_janitor_indexes.sql), not from a walk over every document. Everything else as before:
-- the guard (no open job) again inside every delete (R23).
create or replace function public.cleanup_abandoned_document_index_generations(p_document_id uuid default null,
                                                                               p_limit integer default 100,
                                                                               p_dry_run boolean default true)
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
    v_sources bigint := 0;
begin
    select coalesce(array_agg(candidate.document_id order by candidate.document_id), '{}') into v_documents
      from (select owed.document_id
              from (select g.document_id from public.index_generations g
                     where g.status <> 'committed' and (p_document_id is null or g.document_id = p_document_id)
                    union
                    select d.id from public.documents d
                     where d.deleted_at is not null and d.purged_at is null
                       and (p_document_id is null or d.id = p_document_id)) owed
             where not exists (select 1 from public.ingestion_jobs j
                                where j.document_id = owed.document_id and j.status in ('pending', 'processing'))
             order by owed.document_id
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
        select count(*) into v_sources from public.document_sources s join public.documents d on d.id = s.document_id
         where s.document_id = any (v_documents) and d.deleted_at is not null;
    else
        -- The guard (no open job) again in every delete: a claim may have landed since.
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
        delete from public.document_sources s using public.documents d
         where d.id = s.document_id and s.document_id = any (v_documents) and d.deleted_at is not null
           and not exists (select 1 from public.ingestion_jobs j
                            where j.document_id = s.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_sources = row_count;
        -- A deleted document whose bytes are gone leaves the index the janitor reads (THE LOCK
        -- ORDER: documents after the generations deleted above).
        update public.documents d set purged_at = now()
         where d.id = any (v_documents) and d.deleted_at is not null and d.purged_at is null
           and not exists (select 1 from public.document_sources s where s.document_id = d.id)
           and not exists (select 1 from public.ingestion_jobs j
                            where j.document_id = d.id and j.status in ('pending', 'processing'));
    end if;

    return jsonb_build_object('ok', true, 'dry_run', p_dry_run,
        'documents', coalesce(array_length(v_documents, 1), 0),
        'pages', v_pages, 'sections', v_sections, 'chunks', v_chunks, 'generations', v_generations,
        'sources', v_sources);
end;
$$;

-- Drift: batches whose counters or status disagree with their jobs. The janitor looks at
-- open batches and those finished within `p_finished_within` (default an hour), each
-- counted through the jobs' (batch_id, status) index, so a pass costs what it looks at;
-- `ingest health` passes null and looks at every batch.
-- Replaced by the signatures below, whose added parameter has a default: every call of an
-- earlier release resolves to them.
-- squawk-ignore ban-drop-function
drop function public.refresh_drifted_import_batches(integer);
-- squawk-ignore ban-drop-function
drop function public.drifted_import_batch_ids(integer);

create function public.drifted_import_batch_ids(p_limit integer default 100,
                                                p_finished_within interval default interval '1 hour')
returns setof uuid
language sql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select b.id
      from public.import_batches b
      cross join lateral (
          select count(*) as total,
                 count(*) filter (where j.status = 'completed') as completed,
                 count(*) filter (where j.status = 'failed') as failed,
                 count(*) filter (where j.status = 'cancelled') as cancelled,
                 count(*) filter (where j.status in ('pending', 'processing')) as open
            from public.ingestion_jobs j
           where j.batch_id = b.id) c
     where b.id in (select o.id from public.import_batches o where o.status in ('pending', 'processing')
                    union
                    select f.id from public.import_batches f
                     where p_finished_within is null or f.completed_at >= now() - p_finished_within)
       and ((b.total_files, b.completed_files, b.failed_files, b.cancelled_files, b.open_files)
                is distinct from (c.total, c.completed, c.failed, c.cancelled, c.open)
            or (c.total > 0 and b.status is distinct from public.import_batch_status_of(c.open, c.failed,
                                                                                        b.cancelled_at)))
     order by b.id
     limit greatest(p_limit, 1);
$$;

create function public.refresh_drifted_import_batches(p_limit integer default 100,
                                                      p_finished_within interval default interval '1 hour')
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_ids uuid[];
begin
    select coalesce(array_agg(id order by id), '{}') into v_ids
      from public.drifted_import_batch_ids(p_limit, p_finished_within) as id;
    return jsonb_build_object('ok', true, 'refreshed', coalesce(array_length(v_ids, 1), 0),
        'batches', public.refresh_import_batches(v_ids));
end;
$$;

create or replace function public.ingestion_queue_health(p_stale_after_seconds integer default 300)
returns jsonb
language sql stable
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
        'batch_counter_drift', (select count(*) from public.drifted_import_batch_ids(1000000, null)),
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

-- Dead-lettering in the phases of THE LOCK ORDER: the stale jobs (SKIP LOCKED: the janitor
-- never waits for a job), then their documents in id order (a bulk retry holding one of
-- them is waited for, never the other way round), then the batches.
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
    -- p_stale_after_seconds is kept for callers of earlier releases: the deadline is on the row.
    v_job_ids := array(select j.id from public.ingestion_jobs j
                        where j.status = 'processing' and j.lease_expires_at < now()
                          and j.attempt_count >= j.max_attempts
                        order by j.id
                          for update of j skip locked);
    perform public.lock_documents(array(select j.document_id from public.ingestion_jobs j
                                         where j.id = any (v_job_ids)));
    with expired as (
        update public.ingestion_jobs j
           set status = 'failed', stage = 'dead_letter', completed_at = now(),
               locked_by = null, locked_at = null, lease_expires_at = null,
               error_message = coalesce(j.error_message, 'lease expired on the final attempt'),
               updated_at = now()
         where j.id = any (v_job_ids)
        returning j.id, j.document_id, j.batch_id
    ), demoted as (
        update public.documents d
           set status = 'failed', error_message = 'lease expired on the final attempt', updated_at = now()
          from expired e
         where d.id = e.document_id and d.index_generation_id is null
        returning d.id
    )
    select array_agg(row(e.batch_id, 0, -1, 0, 1)::public.import_batch_delta) into v_deltas from expired e;

    return jsonb_build_object('ok', true, 'expired', cardinality(v_job_ids), 'job_ids', to_jsonb(v_job_ids),
        'batches', public.move_import_batch_counters(coalesce(v_deltas, '{}')));
end;
$$;

select public.secure_rpc('public.max_ack_items()', false);
select public.secure_rpc('public.require_fence(text, text, bigint)', false);
select public.secure_rpc('public.require_failed_document_status(text, text)', false);
select public.secure_rpc('public.require_ack_items(text, jsonb)', false);
select public.secure_rpc('public.lock_settling_ingestion_jobs(uuid[])', false);
select public.secure_rpc('public.fence_refusal(public.ingestion_jobs, uuid, uuid, text, bigint)', false);
select public.secure_rpc('public.lock_commit_generations(uuid[], uuid[])', false);
select public.secure_rpc('public.lock_documents(uuid[])', false);
select public.secure_rpc('public.generation_refusal(uuid, uuid, uuid)', false);
select public.secure_rpc('public.apply_generation_commit(uuid, uuid, jsonb)', false);
select public.secure_rpc('public.drifted_import_batch_ids(integer, interval)', false);
select public.secure_rpc('public.refresh_drifted_import_batches(integer, interval)');
