-- A fault of the worker is not the document's (issue 44, defect 11): when a worker's parsing
-- pool breaks (a child killed by a signal, the pool's manager gone, the fork server dead),
-- the jobs it was parsing go back to pending with the attempt their claim consumed refunded,
-- instead of being retried at the cost of an attempt (a broken pool spent all three
-- attempts of 375 documents in ten seconds).
--
-- A worker cannot tell from one death whose fault it is (the OOM killer picks a child; a
-- document may kill every child that parses it), so the job row counts the refunds
-- (`worker_faults`) and at most `max_attempts` of them are granted: past that, a release is
-- charged like a retry, and a document that kills its child every time still ends `failed`
-- once its attempts are spent (docs/worker.md, "When the parsing pool breaks").
--
-- Expand only: a new column with a constant default (no table rewrite) and a new function;
-- the previous release's client never calls it, and this release's client falls back to a
-- fenced retry where it is missing (SQLSTATE 42883).

-- Only this function changes it (+1 per release); `retry_ingestion_job` leaves it as it is.
alter table public.ingestion_jobs
    add column worker_faults integer not null default 0;

-- THE LOCK ORDER (…_one_lock_order.sql): the job (lock_fenced_ingestion_job), then the
-- document (settle_failed_ingestion_job), then the batch row (move_import_batch_counters,
-- only when the release is charged and ends the job). The fence is checked before any write.
create or replace function public.release_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_lease_token bigint,
    p_error_message text default null,
    p_retry_delay_seconds double precision default 0,
    p_worker_id text default null,
    p_stages jsonb default null
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_job public.ingestion_jobs%rowtype;
    v_refunded boolean;
    v_settled record;
begin
    if p_lease_token is null then
        raise exception 'release_ingestion_job: p_lease_token is required' using errcode = '22023';
    end if;
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, null, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    select * into v_job from public.ingestion_jobs where id = p_job_id;
    v_refunded := v_job.worker_faults < v_job.max_attempts;

    if p_stages is not null then
        perform public.insert_ingestion_job_stages(p_job_id, p_document_id, p_worker_id, p_stages);
    end if;
    -- The refund first, so the retry below is granted (R7 counts attempts consumed at claim).
    update public.ingestion_jobs
       set attempt_count = case when v_refunded then greatest(attempt_count - 1, 0) else attempt_count end,
           worker_faults = worker_faults + 1
     where id = p_job_id;
    v_settled := public.settle_failed_ingestion_job(p_job_id, p_document_id, true, 'failed', 'retry_wait',
                                                    p_error_message, null, coalesce(p_retry_delay_seconds, 0));
    return jsonb_build_object('ok', true, 'job_id', p_job_id, 'refunded', v_refunded,
        'retried', v_settled.retried, 'attempts_exhausted', not v_settled.retried,
        'worker_faults', v_job.worker_faults + 1,
        'batches', public.move_import_batch_counters(v_settled.deltas));
end;
$$;

select public.secure_rpc('public.release_ingestion_job(uuid, uuid, bigint, text, double precision, text, jsonb)');
