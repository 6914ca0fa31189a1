-- Each index generation records the embedder that made its vectors (issue 47, "The index
-- knows its model"; docs/embeddings.md, "The index knows its model").
--
-- Before: only `documents.metadata.embedder` held the embedder's name, merged in by the
-- commit; nothing said how many dimensions the vectors had or which version of the model
-- made them, so a query embedded by another model was compared with them silently.
--
-- Now: `index_generations.embedder`, `embedder_dimensions` and `embedder_version`, written by
-- the commit from the `embedder` the worker sends ({"name", "dimensions", "version"}; null
-- dimensions: no vectors). Search compares them with the query's embedder, `ingest reindex
-- --embeddings` re-embeds the documents whose generation differs from the configured one, and
-- `ingest health` says when vectors are missing or mixed.
--
-- Expand/contract: `complete_ingestion_jobs` reads an optional `embedder` per item (the
-- previous release's items have none: its generations record nothing, and readers fall back
-- to `documents.metadata.embedder`); `commit_document_index_generation` and
-- `commit_and_complete_ingestion_job` take `p_embedder jsonb default null` as their last
-- parameter, so every earlier call form (named or positional) resolves as before. Rows
-- committed before stay null: no backfill (the readers' fallback covers them, and
-- `ingest reindex --embeddings` records them).

alter table public.index_generations
    add column embedder text,
    add column embedder_dimensions integer,
    add column embedder_version text;

-- The commit records the embedder the caller sent: a field it did not send (or dimensions that
-- are not a positive integer) stays null.
-- squawk-ignore ban-drop-function
drop function public.apply_generation_commit(uuid, uuid, jsonb);  -- internal: its callers are replaced below
create function public.apply_generation_commit(p_document_id uuid, p_generation_id uuid, p_metadata jsonb,
                                               p_embedder jsonb default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_pages integer;
    v_sections integer;
    v_chunks integer;
    v_dimensions integer;
begin
    if jsonb_typeof(p_embedder -> 'dimensions') = 'number' and (p_embedder ->> 'dimensions') ~ '^[1-9][0-9]{0,8}$' then
        v_dimensions := (p_embedder ->> 'dimensions')::integer;
    end if;
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
           page_count = v_pages, section_count = v_sections, chunk_count = v_chunks,
           embedder = nullif(p_embedder ->> 'name', ''),
           embedder_dimensions = v_dimensions,
           embedder_version = nullif(p_embedder ->> 'version', '')
     where id = p_generation_id;
    update public.documents
       set index_generation_id = p_generation_id,
           indexed_version = (select g.document_version from public.index_generations g where g.id = p_generation_id),
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

-- Replaced by the same parameters and p_embedder last, with a default: every call form resolves.
-- squawk-ignore ban-drop-function
drop function public.commit_document_index_generation(uuid, uuid, uuid, text, jsonb, bigint);
create function public.commit_document_index_generation(p_job_id uuid, p_document_id uuid,
                                                        p_generation_id uuid, p_worker_id text,
                                                        p_metadata jsonb default '{}',
                                                        p_lease_token bigint default null,
                                                        p_embedder jsonb default null)
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
    return public.apply_generation_commit(p_document_id, p_generation_id, p_metadata, p_embedder);
end;
$$;

-- As in …_one_lock_order.sql, with each item's optional `embedder` passed to the commit.
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
    v_embedders jsonb[];
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
           coalesce(array_agg(x.embedder order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.stage order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.worker_id order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.stages order by x.job_id, x.item), '{}'),
           coalesce(array_agg(x.item::integer order by x.job_id, x.item), '{}'),
           count(*) filter (where x.job_id is null or x.document_id is null or x.lease_token is null)
      into v_job_ids, v_document_ids, v_tokens, v_generation_ids, v_metadata, v_embedders, v_stages, v_worker_ids,
           v_stage_rows, v_positions, v_missing
      from rows from (jsonb_to_recordset(p_items)
               as (job_id uuid, document_id uuid, lease_token bigint, generation_id uuid, metadata jsonb,
                   embedder jsonb, stage text, worker_id text, stages jsonb))
               with ordinality as x(job_id, document_id, lease_token, generation_id, metadata, embedder, stage,
                                    worker_id, stages, item);
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
            else public.apply_generation_commit(v_document_ids[i], v_generation_ids[i], v_metadata[i],
                                                  v_embedders[i])
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

-- Replaced by the same parameters and p_embedder last, with a default: every call form resolves.
-- squawk-ignore ban-drop-function
drop function public.commit_and_complete_ingestion_job(uuid, uuid, uuid, bigint, jsonb, uuid, text);
create function public.commit_and_complete_ingestion_job(p_job_id uuid, p_document_id uuid,
                                                         p_generation_id uuid, p_lease_token bigint,
                                                         p_metadata jsonb default '{}',
                                                         p_batch_id uuid default null,
                                                         p_stage text default 'indexed',
                                                         p_embedder jsonb default null)
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
        'generation_id', p_generation_id, 'metadata', coalesce(p_metadata, '{}'), 'stage', p_stage,
        'embedder', p_embedder)));
    return (v_answer -> 'results' -> 0) - 'item' || jsonb_build_object('batches', v_answer -> 'batches');
end;
$$;

select public.secure_rpc('public.apply_generation_commit(uuid, uuid, jsonb, jsonb)', false);
select public.secure_rpc('public.commit_document_index_generation(uuid, uuid, uuid, text, jsonb, bigint, jsonb)');
select public.secure_rpc('public.commit_and_complete_ingestion_job(uuid, uuid, uuid, bigint, jsonb, uuid, text, jsonb)');
