-- Stage-log rows ride the job's acknowledgement (docs/state-machine.md, "Stage log").
--
-- A worker wrote each stage row (load, parse, chunk, embed, write, commit) with a fenced
-- call of its own: six transactions, six WAL flushes and six round trips per document,
-- more than its artifact rows and its commit together (bench/README.md, "Parsing in
-- children"). Now an item of complete_ingestion_jobs or fail_or_retry_ingestion_jobs may
-- carry its job's stage rows:
--
--   worker_id  the worker that ran the stages (the rows' worker_id)
--   stages     [{stage, started_at, finished_at?, detail?}], in the order they ran
--
-- They are written in the acknowledgement's transaction when, and only when, the item is
-- accepted (its token fences it): a worker that lost its lease still writes nothing, its
-- stage rows included. A completion that commits a generation also writes the `commit`
-- row, timed here around the commit (the client cannot time a statement it is still in).
--
-- Expand only: an item without `stages` is acknowledged exactly as before, so workers of
-- the previous release (one record_ingestion_job_stage call per stage; that RPC stays)
-- keep working against this schema.

-- Insert a job's stage rows, in the order given. Internal (called by the bulk
-- acknowledgements after the item's fence held); malformed rows are refused as a whole.
create function public.insert_ingestion_job_stages(p_job_id uuid, p_document_id uuid, p_worker_id text,
                                                   p_stages jsonb)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if jsonb_typeof(p_stages) is distinct from 'array' then
        raise exception 'stages of job % must be a json array', p_job_id using errcode = '22023';
    end if;
    if exists (select 1 from jsonb_array_elements(p_stages) as s(row)
                where jsonb_typeof(s.row) <> 'object' or s.row ->> 'stage' is null
                   or s.row ->> 'started_at' is null) then
        raise exception 'every stage row of job % needs stage and started_at', p_job_id using errcode = '22023';
    end if;
    insert into public.ingestion_job_stages (job_id, document_id, worker_id, stage, started_at, finished_at, detail)
    select p_job_id, p_document_id, p_worker_id, s.stage, s.started_at, coalesce(s.finished_at, now()),
           coalesce(s.detail, '{}')
      from rows from (jsonb_to_recordset(p_stages)
               as (stage text, started_at timestamptz, finished_at timestamptz, detail jsonb))
               with ordinality as s(stage, started_at, finished_at, detail, n)
     order by s.n;
end;
$$;

-- As in migration 20261201000100, plus each accepted item's stage rows (and its commit's).
create or replace function public.complete_ingestion_jobs(p_items jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_item record;
    v_answer jsonb;
    v_commit_began timestamptz;
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
                 as (job_id uuid, document_id uuid, lease_token bigint, generation_id uuid, metadata jsonb, stage text,
                     worker_id text, stages jsonb))
                 with ordinality as x(job_id, document_id, lease_token, generation_id, metadata, stage, worker_id,
                                      stages, item)
         order by x.job_id, x.item
    loop
        if v_item.job_id is null or v_item.document_id is null or v_item.lease_token is null then
            raise exception 'complete_ingestion_jobs: every item needs job_id, document_id and lease_token'
                using errcode = '22023';
        end if;
        v_commit_began := clock_timestamp();
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
            if v_item.stages is not null then
                if v_item.generation_id is not null then
                    v_item.stages := v_item.stages || jsonb_build_array(jsonb_build_object(
                        'stage', 'commit', 'started_at', v_commit_began, 'finished_at', clock_timestamp(),
                        'detail', jsonb_build_object('seconds', round(extract(epoch from
                            clock_timestamp() - v_commit_began)::numeric, 4), 'completes_job', true)));
                end if;
                perform public.insert_ingestion_job_stages(v_item.job_id, v_item.document_id, v_item.worker_id,
                                                           v_item.stages);
            end if;
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

-- As in migration 20261201000100, plus each accepted item's stage rows (written before the
-- job leaves `processing`, in the same transaction).
create or replace function public.fail_or_retry_ingestion_jobs(p_items jsonb)
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
                     stage text, document_status text, retry_delay_seconds double precision, worker_id text,
                     stages jsonb))
                 with ordinality as x(job_id, document_id, lease_token, retry, error_message, stage, document_status,
                                      retry_delay_seconds, worker_id, stages, item)
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
        if v_item.stages is not null then
            perform public.insert_ingestion_job_stages(v_item.job_id, v_item.document_id, v_item.worker_id,
                                                       v_item.stages);
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

select public.secure_rpc('public.insert_ingestion_job_stages(uuid, uuid, text, jsonb)', false);
