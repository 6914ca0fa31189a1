-- Hardening of the state machine (SPEC §1, §4). Every state-changing RPC is fenced by
-- the lease holder's worker id: a caller that lost its lease gets
-- {"ok": false, "reason": "lease_lost"} and nothing changes. p_worker_id defaults to
-- null ("unfenced") and comes last, so the old 4-argument complete and 8-argument
-- fail calls still resolve (expand/contract).

-- Lock the job row (jobs are always locked before documents and batches) and check the
-- fence. Returns null when the caller may proceed, or the refusal to return as is.
create function lock_fenced_ingestion_job(p_job_id uuid, p_document_id uuid, p_worker_id text)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_job ingestion_jobs%rowtype;
begin
    select * into v_job from ingestion_jobs where id = p_job_id for update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found', 'job_id', p_job_id);
    end if;
    if p_worker_id is not null
       and (v_job.status <> 'processing' or v_job.locked_by is distinct from p_worker_id) then
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

-- R9: lock the batch row before counting, so the last two finishers serialise and the
-- second one counts after the first has committed. NO KEY UPDATE: it serialises refreshes
-- but does not block inserts of jobs and documents that reference the batch.
create or replace function refresh_import_batch_status(p_batch_id uuid)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_total integer;
    v_completed integer;
    v_failed integer;
    v_open integer;
    v_status text;
begin
    perform 1 from import_batches where id = p_batch_id for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'batch_not_found');
    end if;

    -- A new statement: in READ COMMITTED it sees every job write committed before the lock.
    select count(*),
           count(*) filter (where status = 'completed'),
           count(*) filter (where status = 'failed'),
           count(*) filter (where status in ('pending', 'processing'))
      into v_total, v_completed, v_failed, v_open
      from ingestion_jobs
     where batch_id = p_batch_id;

    v_status := case
        when v_total = 0 then 'pending'
        when v_open > 0 then 'processing'
        when v_failed > 0 then 'completed_with_errors'
        else 'completed'
    end;

    update import_batches
       set status = v_status,
           total_files = v_total,
           completed_files = v_completed,
           failed_files = v_failed,
           completed_at = case when v_open = 0 and v_total > 0 then coalesce(completed_at, now()) end,
           updated_at = now()
     where id = p_batch_id;

    return jsonb_build_object('ok', true, 'batch_id', p_batch_id, 'status', v_status,
        'total', v_total, 'completed', v_completed, 'failed', v_failed, 'open', v_open);
end;
$$;

-- Refresh several batches, locking them in id order first: two callers with overlapping
-- sets never wait on each other in opposite orders (no deadlock).
create function refresh_import_batches(p_batch_ids uuid[])
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_results jsonb := '[]'::jsonb;
    v_batch_id uuid;
begin
    perform 1 from import_batches where id = any (p_batch_ids) order by id for no key update;
    for v_batch_id in select distinct b from unnest(p_batch_ids) as b where b is not null order by 1 loop
        v_results := v_results || jsonb_build_array(refresh_import_batch_status(v_batch_id));
    end loop;
    return v_results;
end;
$$;

-- R17: one open job per document; a second enqueue reports the open one.
create or replace function enqueue_ingestion_job(
    p_document_id uuid,
    p_batch_id uuid default null,
    p_kind text default 'index',
    p_max_attempts integer default 3
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_job_id uuid;
begin
    perform 1 from documents where id = p_document_id and deleted_at is null;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'document_not_found');
    end if;

    -- The open job we collide with may finish between the insert and the look-up: retry.
    for attempt in 1..3 loop
        insert into ingestion_jobs (document_id, batch_id, kind, max_attempts)
        values (p_document_id, p_batch_id, p_kind, p_max_attempts)
        on conflict (document_id) where status in ('pending', 'processing') do nothing
        returning id into v_job_id;
        if v_job_id is not null then
            exit;
        end if;
        select id into v_job_id from ingestion_jobs
         where document_id = p_document_id and status in ('pending', 'processing');
        if v_job_id is not null then
            return jsonb_build_object('ok', false, 'reason', 'already_queued', 'job_id', v_job_id);
        end if;
    end loop;
    if v_job_id is null then
        return jsonb_build_object('ok', false, 'reason', 'contended');
    end if;

    -- R15: an indexed document stays indexed until its new generation commits.
    update documents
       set status = case when index_generation_id is null then 'queued' else status end,
           error_message = case when index_generation_id is null then null else error_message end,
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'job_id', v_job_id,
        'batch', case when p_batch_id is not null then refresh_import_batch_status(p_batch_id) end);
end;
$$;

-- R1: the holder renews its lease; anyone else learns it lost it.
create function heartbeat_ingestion_job(
    p_job_id uuid,
    p_worker_id text,
    p_progress integer default null,
    p_stage text default null
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_locked_at timestamptz;
begin
    update ingestion_jobs
       set locked_at = now(),
           progress = coalesce(least(greatest(p_progress, 0), 100), progress),
           stage = coalesce(p_stage, stage),
           updated_at = now()
     where id = p_job_id and status = 'processing' and locked_by = p_worker_id
    returning locked_at into v_locked_at;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'job_id', p_job_id);
    end if;
    return jsonb_build_object('ok', true, 'job_id', p_job_id, 'locked_at', v_locked_at);
end;
$$;

-- Only the holder may start a generation for its job.
create or replace function begin_document_index_generation(p_job_id uuid, p_document_id uuid, p_worker_id text)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_refusal jsonb;
    v_generation_id uuid;
begin
    v_refusal := lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id);
    if v_refusal is not null then
        return v_refusal;
    end if;
    insert into index_generations (document_id, job_id, worker_id)
    values (p_document_id, p_job_id, p_worker_id)
    returning id into v_generation_id;
    return jsonb_build_object('ok', true, 'generation_id', v_generation_id);
end;
$$;

-- R3/R5 and count drift: fenced; counts come from the rows; metadata is merged.
-- Replaced below, in this transaction, by a signature that old callers still resolve to
-- (tests/migration/test_expand_contract.py guards it).
-- squawk-ignore ban-drop-function
drop function commit_document_index_generation(uuid, uuid, uuid, jsonb);
create function commit_document_index_generation(
    p_job_id uuid,
    p_document_id uuid,
    p_generation_id uuid,
    p_worker_id text,
    p_metadata jsonb default '{}'
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_refusal jsonb;
    v_generation index_generations%rowtype;
    v_pages integer;
    v_sections integer;
    v_chunks integer;
begin
    v_refusal := lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id);
    if v_refusal is not null then
        return v_refusal;
    end if;

    select * into v_generation from index_generations
     where id = p_generation_id and document_id = p_document_id
       for update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'generation_not_found');
    end if;
    if v_generation.status <> 'building' then
        return jsonb_build_object('ok', false, 'reason', 'generation_not_building',
            'status', v_generation.status);
    end if;
    perform 1 from documents where id = p_document_id for update;

    select count(*) into v_pages from document_pages
     where document_id = p_document_id and index_generation_id = p_generation_id;
    select count(*) into v_sections from document_sections
     where document_id = p_document_id and index_generation_id = p_generation_id;
    select count(*) into v_chunks from document_chunks
     where document_id = p_document_id and index_generation_id = p_generation_id;

    update index_generations set status = 'superseded'
     where document_id = p_document_id and status = 'committed';
    update index_generations
       set status = 'committed', committed_at = now(),
           page_count = v_pages, section_count = v_sections, chunk_count = v_chunks
     where id = p_generation_id;
    update documents
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

-- R2: fenced completion. Replaces the 4-argument form; 4-argument calls still resolve.
-- Replaced below, in this transaction, by a signature that old callers still resolve to
-- (tests/migration/test_expand_contract.py guards it).
-- squawk-ignore ban-drop-function
drop function complete_ingestion_job(uuid, uuid, uuid, text);
create function complete_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_batch_id uuid default null,
    p_stage text default 'indexed',
    p_worker_id text default null
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_refusal jsonb;
    v_batches uuid[];
    v_superseded uuid[];
begin
    v_refusal := lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id);
    if v_refusal is not null then
        return v_refusal;
    end if;

    with done as (
        update ingestion_jobs
           set status = 'completed', stage = p_stage, progress = 100, completed_at = now(),
               locked_by = null, locked_at = null, error_message = null, updated_at = now()
         where id = p_job_id
        returning batch_id
    )
    select array_agg(batch_id) into v_batches from done;

    -- Older failed jobs of this document are settled by this success.
    with superseded as (
        update ingestion_jobs
           set status = 'completed', stage = 'superseded', completed_at = now(), updated_at = now()
         where document_id = p_document_id and id <> p_job_id and status = 'failed'
        returning batch_id
    )
    select array_agg(batch_id) into v_superseded from superseded;

    update documents
       set status = case when index_generation_id is not null then 'indexed' else status end,
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'job_id', p_job_id,
        'batches', refresh_import_batches(array[p_batch_id] || v_batches || v_superseded));
end;
$$;

-- R2, R7, R15: fenced failure or retry. Replaces the 8-argument form.
-- Replaced below, in this transaction, by a signature that old callers still resolve to
-- (tests/migration/test_expand_contract.py guards it).
-- squawk-ignore ban-drop-function
drop function fail_or_retry_ingestion_job(uuid, uuid, uuid, boolean, text, text, text, timestamptz);
create function fail_or_retry_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_batch_id uuid default null,
    p_retry boolean default false,
    p_document_status text default 'failed',
    p_stage text default 'failed',
    p_error_message text default null,
    p_next_run_at timestamptz default null,
    p_worker_id text default null
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_refusal jsonb;
    v_job ingestion_jobs%rowtype;
    v_retry boolean;
begin
    -- The fence is checked before any write.
    v_refusal := lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id);
    if v_refusal is not null then
        return v_refusal;
    end if;
    select * into v_job from ingestion_jobs where id = p_job_id;

    -- R7: a retry is granted only while attempts remain (attempts are consumed at claim).
    v_retry := coalesce(p_retry, false) and v_job.attempt_count < v_job.max_attempts;

    update ingestion_jobs
       set status = case when v_retry then 'pending' else 'failed' end,
           stage = p_stage,
           next_run_at = case when v_retry then coalesce(p_next_run_at, now()) else next_run_at end,
           completed_at = case when v_retry then null else now() end,
           locked_by = null, locked_at = null,
           error_message = p_error_message,
           updated_at = now()
     where id = p_job_id;

    -- R15: a document with a committed generation keeps it, and stays readable.
    update documents
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
        'batches', refresh_import_batches(array[p_batch_id, v_job.batch_id]));
end;
$$;

-- Operator retry of a failed job: never a completed job, never a live lease.
create function retry_ingestion_job(p_job_id uuid)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_job ingestion_jobs%rowtype;
    v_open uuid;
begin
    select * into v_job from ingestion_jobs where id = p_job_id for update;
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
    select id into v_open from ingestion_jobs
     where document_id = v_job.document_id and status in ('pending', 'processing');
    if v_open is not null then
        return jsonb_build_object('ok', false, 'reason', 'already_queued', 'job_id', v_open);
    end if;

    begin
        update ingestion_jobs
           set status = 'pending', stage = 'queued', progress = 0, attempt_count = 0,
               next_run_at = now(), completed_at = null, error_message = null, updated_at = now()
         where id = p_job_id;
    exception when unique_violation then
        -- an enqueue for the same document committed since the check above
        return jsonb_build_object('ok', false, 'reason', 'already_queued');
    end;
    update documents
       set status = case when index_generation_id is null then 'queued' else status end,
           updated_at = now()
     where id = v_job.document_id;

    return jsonb_build_object('ok', true, 'job_id', p_job_id,
        'batches', refresh_import_batches(array[v_job.batch_id]));
end;
$$;

-- R7 safety net: a stale lease on a job with no attempts left is dead-lettered.
create function expire_stale_ingestion_jobs(p_stale_after_seconds integer default 300)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_job_ids uuid[];
    v_batches uuid[];
begin
    with stale as (
        select id from ingestion_jobs
         where status = 'processing'
           and locked_at < now() - make_interval(secs => p_stale_after_seconds)
           and attempt_count >= max_attempts
         order by id
           for update skip locked
    ), expired as (
        update ingestion_jobs j
           set status = 'failed', stage = 'dead_letter', completed_at = now(),
               locked_by = null, locked_at = null,
               error_message = coalesce(j.error_message, 'lease expired on the final attempt'),
               updated_at = now()
          from stale
         where j.id = stale.id
        returning j.id, j.document_id, j.batch_id
    ), demoted as (
        update documents d
           set status = 'failed', error_message = 'lease expired on the final attempt', updated_at = now()
          from expired e
         where d.id = e.document_id and d.index_generation_id is null
        returning d.id
    )
    select array_agg(id), array_agg(batch_id) into v_job_ids, v_batches from expired;

    return jsonb_build_object('ok', true, 'expired', coalesce(array_length(v_job_ids, 1), 0),
        'job_ids', to_jsonb(coalesce(v_job_ids, '{}')),
        'batches', refresh_import_batches(coalesce(v_batches, '{}')));
end;
$$;

-- R23: the "no open job for this document" guard is re-asserted inside every delete,
-- so a build claimed after candidates were chosen is never touched.
create or replace function cleanup_abandoned_document_index_generations(
    p_document_id uuid default null,
    p_limit integer default 100,
    p_dry_run boolean default true
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
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
              from index_generations g
              join documents d on d.id = g.document_id
             where g.status <> 'committed'
               and g.id is distinct from d.index_generation_id
               and (p_document_id is null or g.document_id = p_document_id)
               and not exists (select 1 from ingestion_jobs j
                                where j.document_id = g.document_id
                                  and j.status in ('pending', 'processing'))
             order by g.document_id
             limit greatest(p_limit, 0)) candidate;

    if p_dry_run then
        select count(*) into v_pages from document_pages p join documents d on d.id = p.document_id
         where p.document_id = any (v_documents) and p.index_generation_id is distinct from d.index_generation_id;
        select count(*) into v_sections from document_sections s join documents d on d.id = s.document_id
         where s.document_id = any (v_documents) and s.index_generation_id is distinct from d.index_generation_id;
        select count(*) into v_chunks from document_chunks c join documents d on d.id = c.document_id
         where c.document_id = any (v_documents) and c.index_generation_id is distinct from d.index_generation_id;
        select count(*) into v_generations from index_generations g join documents d on d.id = g.document_id
         where g.document_id = any (v_documents) and g.status <> 'committed' and g.id is distinct from d.index_generation_id;
    else
        delete from document_pages p using documents d
         where d.id = p.document_id and p.document_id = any (v_documents)
           and p.index_generation_id is distinct from d.index_generation_id
           and not exists (select 1 from ingestion_jobs j
                            where j.document_id = p.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_pages = row_count;
        delete from document_sections s using documents d
         where d.id = s.document_id and s.document_id = any (v_documents)
           and s.index_generation_id is distinct from d.index_generation_id
           and not exists (select 1 from ingestion_jobs j
                            where j.document_id = s.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_sections = row_count;
        delete from document_chunks c using documents d
         where d.id = c.document_id and c.document_id = any (v_documents)
           and c.index_generation_id is distinct from d.index_generation_id
           and not exists (select 1 from ingestion_jobs j
                            where j.document_id = c.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_chunks = row_count;
        delete from index_generations g using documents d
         where d.id = g.document_id and g.document_id = any (v_documents)
           and g.status <> 'committed' and g.id is distinct from d.index_generation_id
           and not exists (select 1 from ingestion_jobs j
                            where j.document_id = g.document_id and j.status in ('pending', 'processing'));
        get diagnostics v_generations = row_count;
    end if;

    return jsonb_build_object('ok', true, 'dry_run', p_dry_run,
        'documents', coalesce(array_length(v_documents, 1), 0),
        'pages', v_pages, 'sections', v_sections, 'chunks', v_chunks, 'generations', v_generations);
end;
$$;

create function ingestion_queue_health(p_stale_after_seconds integer default 300)
returns jsonb
language sql
stable
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
        'stuck_batches', (select count(*) from import_batches b
                           where b.status = 'processing'
                             and not exists (select 1 from ingestion_jobs j
                                              where j.batch_id = b.id and j.status in ('pending', 'processing'))),
        'count_mismatches', (select count(*) from documents d
                              where d.index_generation_id is not null
                                and d.chunk_count <> (select count(*) from document_chunks c
                                                       where c.document_id = d.id
                                                         and c.index_generation_id = d.index_generation_id)),
        'generations_awaiting_cleanup', (select count(*) from index_generations g
                                          join documents d on d.id = g.document_id
                                         where g.status <> 'committed'
                                           and g.id is distinct from d.index_generation_id)
    );
$$;

-- Security: the RPCs run as their owner (SECURITY DEFINER, search_path pinned above), so
-- the worker role needs EXECUTE and nothing on the queue tables. PUBLIC, and Supabase's
-- anon/authenticated roles when present, get nothing. Later migrations call secure_rpc()
-- for every RPC they add.
do $$
begin
    if not exists (select 1 from pg_roles where rolname = 'ingestion_worker') then
        create role ingestion_worker nologin;
    end if;
end;
$$;

create function secure_rpc(p_function regprocedure, p_worker_may_call boolean default true)
returns void
language plpgsql
set search_path = pg_catalog, public, pg_temp
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
revoke all on function secure_rpc(regprocedure, boolean) from public;

-- Internal helpers run as definer too but are granted to no one.
select secure_rpc(p.oid::regprocedure,
                  p.proname <> all (array['lock_fenced_ingestion_job', 'refresh_import_batches']))
  from pg_proc p
 where p.pronamespace = 'public'::regnamespace
   and p.proname = any (array[
       'lock_fenced_ingestion_job', 'refresh_import_batches', 'refresh_import_batch_status',
       'create_import_batch', 'enqueue_ingestion_job', 'claim_ingestion_jobs', 'heartbeat_ingestion_job',
       'begin_document_index_generation', 'commit_document_index_generation',
       'complete_ingestion_job', 'fail_or_retry_ingestion_job', 'retry_ingestion_job',
       'expire_stale_ingestion_jobs', 'cleanup_abandoned_document_index_generations',
       'ingestion_queue_health']);

-- What the worker writes directly: the artifacts of its own generations and the stage
-- log. Queue tables, batches and the committed pointer only change through the RPCs.
grant usage on schema public to ingestion_worker;
grant select on documents, document_sources, import_batches, ingestion_jobs, index_generations
    to ingestion_worker;
grant select, insert on document_pages, document_sections, document_chunks to ingestion_worker;
grant select on ingestion_job_stages, committed_document_chunks to ingestion_worker;

-- Supabase's default privileges hand anon/authenticated every new table in public: take
-- them back, or those roles could rewrite the queue and bypass every fence.
do $$
declare
    v_role text;
begin
    foreach v_role in array array['anon', 'authenticated'] loop
        if exists (select 1 from pg_roles where rolname = v_role) then
            execute format('revoke all on all tables in schema public from %I', v_role);
            execute format('revoke all on all sequences in schema public from %I', v_role);
        end if;
    end loop;
end;
$$;
