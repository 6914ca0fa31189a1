-- Document lifecycle: delete a document, cancel an import batch, retry failed jobs
-- (docs/state-machine.md, "Lifecycle").
--
-- A delete must win against a build in flight: without a fence the worker commits after
-- the delete and the document is back. Here a delete cancels the document's open job in the
-- same transaction that takes the document out of search, so every later fenced call of the
-- building worker (heartbeat, begin, commit, complete, fail) sees a job that is no longer
-- `processing` and is refused (`lease_lost`), and the artifact fence refuses its COPY rows.
-- A batch cancel does the same to every open job of the batch.
--
-- `cancelled` is a new terminal state of jobs and batches; documents gain `deleted` and
-- `cancelled`. Batches count cancelled jobs (`cancelled_files`) beside the other counters,
-- and a cancelled batch remembers it (`cancelled_at`).
--
-- Lock order, the same as commit's (job, generation, document, batch last), so a delete or a
-- cancel racing a commit waits for it or makes it wait, never deadlocks with it.
--
-- Expand/contract: every RPC signature is kept (only an internal helper, the two-argument
-- batch status rule that no client calls, is replaced by a three-argument one).

-- The state checks, widened: each is replaced by one that accepts more (NOT VALID here, so
-- no scan under this file's locks; the next migration validates them).
-- squawk-ignore ban-drop-constraint
alter table public.ingestion_jobs drop constraint ingestion_jobs_status_check;
alter table public.ingestion_jobs add constraint ingestion_jobs_status_check
    check (status in ('pending', 'processing', 'completed', 'failed', 'cancelled')) not valid;

-- squawk-ignore ban-drop-constraint
alter table public.import_batches drop constraint import_batches_status_check;
alter table public.import_batches add constraint import_batches_status_check
    check (status in ('pending', 'processing', 'completed', 'completed_with_errors', 'cancelled')) not valid;

-- squawk-ignore ban-drop-constraint
alter table public.documents drop constraint documents_status_check;
alter table public.documents add constraint documents_status_check
    check (status in ('queued', 'processing', 'indexed', 'failed', 'deleted', 'cancelled')) not valid;

alter table public.import_batches add column cancelled_files integer not null default 0;
alter table public.import_batches add column cancelled_at timestamptz;

-- The one rule for a batch's status, now knowing cancelled batches.
create function public.import_batch_status_of(p_open bigint, p_failed bigint, p_cancelled_at timestamptz)
returns text
language sql
immutable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select case when p_open > 0 then 'processing'
                when p_cancelled_at is not null then 'cancelled'
                when p_failed > 0 then 'completed_with_errors'
                else 'completed' end;
$$;

create or replace function public.move_import_batch_counters(p_deltas public.import_batch_delta[])
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
                                                      b.failed_files + v_delta.failed, b.cancelled_at),
               completed_at = case when b.open_files + v_delta.open > 0 then null
                                   else coalesce(b.completed_at, now()) end,
               updated_at = now()
         where b.id = v_delta.batch_id
        returning b.* into v_row;
        if found then
            v_results := v_results || jsonb_build_array(public.import_batch_counters_of(v_row));
        end if;
    end loop;
    return v_results;
end;
$$;

-- A batch row's counters as the RPCs answer them.
create function public.import_batch_counters_of(p_batch public.import_batches)
returns jsonb
language sql
immutable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select jsonb_build_object('ok', true, 'batch_id', p_batch.id, 'status', p_batch.status,
        'total', p_batch.total_files, 'completed', p_batch.completed_files, 'failed', p_batch.failed_files,
        'cancelled', p_batch.cancelled_files, 'open', p_batch.open_files);
$$;

-- Jobs cancelled in one batch: open -n, cancelled +n, in the caller's transaction, last.
create function public.cancel_import_batch_counters(p_batch_id uuid, p_cancelled integer,
                                                    p_mark_cancelled boolean default false)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_row public.import_batches%rowtype;
begin
    update public.import_batches b
       set open_files = greatest(b.open_files - p_cancelled, 0),
           cancelled_files = b.cancelled_files + p_cancelled,
           cancelled_at = case when p_mark_cancelled then coalesce(b.cancelled_at, now()) else b.cancelled_at end,
           status = public.import_batch_status_of(
               greatest(b.open_files - p_cancelled, 0), b.failed_files,
               case when p_mark_cancelled then coalesce(b.cancelled_at, now()) else b.cancelled_at end),
           completed_at = case when b.open_files - p_cancelled > 0 then null
                               else coalesce(b.completed_at, now()) end,
           updated_at = now()
     where b.id = p_batch_id
    returning b.* into v_row;
    if not found then
        return null;
    end if;
    return public.import_batch_counters_of(v_row);
end;
$$;

-- The repair path counts cancelled jobs too.
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
    v_cancelled integer;
    v_open integer;
    v_row public.import_batches%rowtype;
begin
    perform 1 from public.import_batches where id = p_batch_id for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'batch_not_found');
    end if;

    -- A new statement: in READ COMMITTED it sees every job write committed before the lock.
    select count(*),
           count(*) filter (where status = 'completed'),
           count(*) filter (where status = 'failed'),
           count(*) filter (where status = 'cancelled'),
           count(*) filter (where status in ('pending', 'processing'))
      into v_total, v_completed, v_failed, v_cancelled, v_open
      from public.ingestion_jobs
     where batch_id = p_batch_id;

    update public.import_batches
       set status = public.import_batch_status_of(v_open, v_failed, cancelled_at),
           total_files = v_total,
           completed_files = v_completed,
           failed_files = v_failed,
           cancelled_files = v_cancelled,
           open_files = v_open,
           completed_at = case when v_open = 0 then coalesce(completed_at, now()) end,
           updated_at = now()
     where id = p_batch_id
    returning * into v_row;

    return public.import_batch_counters_of(v_row);
end;
$$;

create or replace function public.drifted_import_batch_ids(p_limit integer default 100)
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
                        count(*) filter (where j.status = 'cancelled') as cancelled,
                        count(*) filter (where j.status in ('pending', 'processing')) as open
                   from public.ingestion_jobs j
                  where j.batch_id is not null
                  group by j.batch_id) c on c.batch_id = b.id
     where (b.total_files, b.completed_files, b.failed_files, b.cancelled_files, b.open_files)
               is distinct from (coalesce(c.total, 0), coalesce(c.completed, 0), coalesce(c.failed, 0),
                                 coalesce(c.cancelled, 0), coalesce(c.open, 0))
        or (coalesce(c.total, 0) > 0
            and b.status is distinct from public.import_batch_status_of(c.open, c.failed, b.cancelled_at))
     order by b.id
     limit greatest(p_limit, 1);
$$;

-- Cancel open jobs (their rows locked by the caller): the job is terminal, its building
-- generations abandoned, its never-indexed document `cancelled`. Returns how many per batch.
create function public.cancel_locked_ingestion_jobs(p_job_ids uuid[], p_reason text,
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

create function public.delete_document(p_document_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_document public.documents%rowtype;
    v_job public.ingestion_jobs%rowtype;
    v_in_flight boolean;
    v_batch jsonb;
begin
    -- Lock order as commit's: the open job, the generations, the document, the batch last.
    select * into v_job from public.ingestion_jobs
     where document_id = p_document_id and status in ('pending', 'processing')
       for no key update;
    perform 1 from public.index_generations
     where document_id = p_document_id and status in ('building', 'committed')
     order by id
       for no key update;
    select * into v_document from public.documents where id = p_document_id for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found', 'document_id', p_document_id);
    end if;
    if v_document.deleted_at is not null then
        return jsonb_build_object('ok', false, 'reason', 'already_deleted', 'document_id', p_document_id,
                                  'deleted_at', v_document.deleted_at);
    end if;
    -- An enqueue that was in flight when we looked for the open job has committed by now
    -- (its update of the document is what we waited for): look again. No claim can hold
    -- that job (a claim locks the document too, and skips it while we hold it).
    if v_job.id is null then
        select * into v_job from public.ingestion_jobs
         where document_id = p_document_id and status in ('pending', 'processing')
           for no key update;
    end if;

    v_in_flight := v_job.id is not null and v_job.status = 'processing';
    if v_job.id is not null then
        perform public.cancel_locked_ingestion_jobs(array[v_job.id], 'document deleted');
    end if;
    update public.index_generations set status = 'abandoned'
     where document_id = p_document_id and status in ('building', 'committed');
    update public.documents
       set deleted_at = now(), status = 'deleted', index_generation_id = null,
           page_count = 0, section_count = 0, chunk_count = 0, updated_at = now()
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

create function public.cancel_import_batch(p_batch_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_ids uuid[];
    v_in_flight integer;
    v_status text;
    v_cancelled integer;
begin
    select status into v_status from public.import_batches where id = p_batch_id;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'batch_not_found', 'batch_id', p_batch_id);
    end if;
    -- The open jobs first (a claim holding one is waited for, then its job is cancelled).
    select coalesce(array_agg(id order by id), '{}'), count(*) filter (where status = 'processing')
      into v_job_ids, v_in_flight
      from (select id, status from public.ingestion_jobs
             where batch_id = p_batch_id and status in ('pending', 'processing')
             order by id
               for no key update) open_jobs;
    if cardinality(v_job_ids) = 0 then
        return jsonb_build_object('ok', false, 'reason', 'nothing_open', 'batch_id', p_batch_id,
                                  'status', v_status);
    end if;
    select coalesce(sum(c.cancelled), 0) into v_cancelled
      from public.cancel_locked_ingestion_jobs(v_job_ids, 'import batch cancelled') c;
    return jsonb_build_object('ok', true, 'batch_id', p_batch_id, 'cancelled', v_cancelled,
        'in_flight', v_in_flight, 'job_ids', to_jsonb(v_job_ids),
        'batch', public.cancel_import_batch_counters(p_batch_id, v_cancelled, true));
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
        return jsonb_build_object('ok', false, 'reason', 'not_found', 'job_id', p_job_id);
    end if;
    if v_job.status = 'completed' then
        return jsonb_build_object('ok', false, 'reason', 'completed', 'job_id', p_job_id);
    end if;
    if v_job.status = 'processing' then
        return jsonb_build_object('ok', false, 'reason', 'lease_live', 'job_id', p_job_id,
                                  'locked_by', v_job.locked_by);
    end if;
    if v_job.status = 'pending' then
        return jsonb_build_object('ok', false, 'reason', 'already_queued', 'job_id', p_job_id);
    end if;
    if v_job.status = 'cancelled' then
        return jsonb_build_object('ok', false, 'reason', 'cancelled', 'job_id', p_job_id);
    end if;
    perform 1 from public.documents where id = v_job.document_id and deleted_at is null for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'document_deleted', 'job_id', p_job_id);
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
        return jsonb_build_object('ok', false, 'reason', 'already_queued', 'job_id', p_job_id);
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

create function public.retry_failed_ingestion_jobs(p_job_ids uuid[] default null, p_batch_id uuid default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_id uuid;
    v_answer jsonb;
    v_retried uuid[] := '{}';
    v_refused jsonb := '[]'::jsonb;
begin
    for v_job_id in
        select j.id from public.ingestion_jobs j
         where (p_job_ids is not null and j.id = any (p_job_ids))
            or (p_job_ids is null and j.status = 'failed'
                and (p_batch_id is null or j.batch_id = p_batch_id)
                and exists (select 1 from public.documents d where d.id = j.document_id and d.deleted_at is null))
         order by j.id
    loop
        v_answer := public.retry_ingestion_job(v_job_id);
        if (v_answer ->> 'ok')::boolean then
            v_retried := v_retried || v_job_id;
        else
            v_refused := v_refused || jsonb_build_array(jsonb_build_object(
                'job_id', v_job_id, 'reason', v_answer ->> 'reason'));
        end if;
    end loop;
    -- Ids that name no job at all.
    if p_job_ids is not null then
        select v_refused || coalesce(jsonb_agg(jsonb_build_object('job_id', missing, 'reason', 'not_found')
                                               order by missing), '[]'::jsonb)
          into v_refused
          from unnest(p_job_ids) as missing
         where not exists (select 1 from public.ingestion_jobs j where j.id = missing);
    end if;
    return jsonb_build_object('ok', true, 'retried', cardinality(v_retried), 'job_ids', to_jsonb(v_retried),
                              'refused', v_refused);
end;
$$;

-- An enqueue locks the document it checks, so a delete either comes first (and the enqueue
-- answers document_not_found) or after (and cancels the job the enqueue made).
create or replace function public.enqueue_ingestion_job(p_document_id uuid, p_batch_id uuid default null,
                                                        p_kind text default 'index', p_max_attempts integer default 3)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job_id uuid;
    v_batches jsonb;
begin
    perform 1 from public.documents where id = p_document_id and deleted_at is null for no key update;
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

-- The guarded cleanup also removes what a delete left to it: a deleted document's bytes
-- (and, as before, every generation that is not committed), once it has no open job.
create or replace function public.cleanup_abandoned_document_index_generations(
    p_document_id uuid default null, p_limit integer default 100, p_dry_run boolean default true)
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
    select coalesce(array_agg(candidate.document_id), '{}') into v_documents
      from (select distinct d.id as document_id
              from public.documents d
             where (p_document_id is null or d.id = p_document_id)
               and (exists (select 1 from public.index_generations g
                             where g.document_id = d.id and g.status <> 'committed'
                               and g.id is distinct from d.index_generation_id)
                    or (d.deleted_at is not null
                        and exists (select 1 from public.document_sources s where s.document_id = d.id)))
               and not exists (select 1 from public.ingestion_jobs j
                                where j.document_id = d.id and j.status in ('pending', 'processing'))
             order by d.id
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
    end if;

    return jsonb_build_object('ok', true, 'dry_run', p_dry_run,
        'documents', coalesce(array_length(v_documents, 1), 0),
        'pages', v_pages, 'sections', v_sections, 'chunks', v_chunks, 'generations', v_generations,
        'sources', v_sources);
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
               count(*) filter (where j.status = 'cancelled') as cancelled,
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
                       'failed_files', c.failed_files, 'cancelled_files', c.cancelled_files,
                       'created_at', c.created_at, 'completed_at', c.completed_at, 'cancelled_at', c.cancelled_at,
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

-- Every caller of the two-argument rule was replaced above; it is internal (granted to
-- no one), so no client of an older release calls it.
-- squawk-ignore ban-drop-function
drop function public.import_batch_status_of(bigint, bigint);

select public.secure_rpc('public.import_batch_status_of(bigint, bigint, timestamptz)', false);
select public.secure_rpc('public.import_batch_counters_of(public.import_batches)', false);
select public.secure_rpc('public.cancel_import_batch_counters(uuid, integer, boolean)', false);
select public.secure_rpc('public.cancel_locked_ingestion_jobs(uuid[], text, text)', false);
-- The operator calls run as the pipeline's role, as retry_ingestion_job and the cleanup do:
-- `ingest delete/cancel/retry` connect with the same DATABASE_URL as `ingest work`.
select public.secure_rpc('public.delete_document(uuid)');
select public.secure_rpc('public.cancel_import_batch(uuid)');
select public.secure_rpc('public.retry_failed_ingestion_jobs(uuid[], uuid)');
