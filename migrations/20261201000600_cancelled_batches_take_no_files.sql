-- A cancelled import batch takes no new files (docs/state-machine.md, "Lifecycle").
--
-- `cancelled` is a terminal state of a batch, but enqueue_ingestion_job still added jobs to
-- a cancelled batch: `ingest cancel` on a batch whose folder was still being enqueued let
-- every later file in, reopened the batch (`processing`) and had the new jobs built. Now
-- such an enqueue raises SQLSTATE IF002 and its whole transaction rolls back (the caller's
-- document row and bytes with it: the upload stays atomic); the client stops there with a
-- one-line message, and the files added before the cancel stay as they are.
--
-- Left open, by design of the lock order (job, generations, document, batch): an enqueue
-- that committed while the cancel was between its look-up of the open jobs and its update
-- of the batch row keeps its job (one file at most per enqueue in flight); the batch ends
-- `cancelled` when that job finishes.

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
    -- Checked after the batch row is updated (so locked until commit, and a cancel still
    -- running was waited for): a new statement sees a cancel that committed before.
    if p_batch_id is not null
       and exists (select 1 from public.import_batches where id = p_batch_id and cancelled_at is not null) then
        raise exception 'import batch % was cancelled: it takes no new files', p_batch_id
            using errcode = 'IF002',
                  hint = 'Enqueue into a new batch; the files added before the cancel stay as they are.';
    end if;
    return jsonb_build_object('ok', true, 'job_id', v_job_id, 'batch', v_batches -> 0);
end;
$$;
