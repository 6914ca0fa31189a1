-- fail_or_retry on the server's clock, and the stage of a refused retry
-- (tests/race/test_retry_delay.py reproduces both at the previous head):
--   * the worker computed next_run_at on its own clock, compared with the server's now()
--     by the claim: a worker whose clock runs behind re-queues retries that are claimable
--     at once (no backoff), one whose clock runs ahead delays them. The caller now passes
--     the delay (`p_retry_delay_seconds`) and the server computes now() + delay;
--   * a retry requested on the final attempt is refused (R7) and the job ends `failed`,
--     but its stage read the caller's `retry_wait`. A refused retry stores `failed`.
--
-- Expand/contract: `p_retry_delay_seconds double precision default null` is the new last
-- parameter; without it `p_next_run_at` applies as before, so the calls of earlier
-- releases (8-argument positional, worker-id and lease-token named forms) still resolve.

-- squawk-ignore ban-drop-function
drop function public.fail_or_retry_ingestion_job(uuid, uuid, uuid, boolean, text, text, text, timestamptz, text, bigint);
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
    v_job public.ingestion_jobs%rowtype;
    v_retry boolean;
begin
    if p_retry_delay_seconds is not null and (p_retry_delay_seconds < 0 or p_retry_delay_seconds = 'NaN'::float8
                                              or p_retry_delay_seconds = 'Infinity'::float8) then
        raise exception 'fail_or_retry_ingestion_job: p_retry_delay_seconds must be a finite number >= 0'
            using errcode = '22023';
    end if;
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    select * into v_job from public.ingestion_jobs where id = p_job_id;

    -- R7: a retry is granted only while attempts remain (attempts are consumed at claim).
    v_retry := coalesce(p_retry, false) and v_job.attempt_count < v_job.max_attempts;

    update public.ingestion_jobs
       set status = case when v_retry then 'pending' else 'failed' end,
           -- a refused retry ends the job: its stage says so, not the caller's retry_wait
           stage = case when coalesce(p_retry, false) and not v_retry then 'failed' else p_stage end,
           next_run_at = case
               when not v_retry then next_run_at
               when p_retry_delay_seconds is not null then now() + make_interval(secs => p_retry_delay_seconds)
               else coalesce(p_next_run_at, now())
           end,
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

select public.secure_rpc('public.fail_or_retry_ingestion_job(uuid, uuid, uuid, boolean, text, text, text, '
                         'timestamptz, text, bigint, double precision)');
