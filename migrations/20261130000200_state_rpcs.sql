-- The job-queue state machine as first designed ("naive"). Kept as history on purpose:
-- the race suite runs against a database migrated to here and must observe each bug
-- that 20261130000300_harden_state_rpcs.sql then fixes (SPEC §4). Known defects:
--   * complete/fail write by job id alone: a reclaimed worker overwrites the new holder (R2)
--   * no heartbeat: a long job is reclaimed while its worker is alive (R1)
--   * retry re-pends exhausted jobs, which claim never takes again (R7)
--   * refresh counts without locking the batch row (R9)
--   * failure of an indexed document's reindex demotes it and drops its index (R15)
--   * commit replaces metadata and trusts client counts (R3/R5, count drift)
--   * cleanup checks "no open job" only when choosing candidates (R23)

create function create_import_batch(p_name text, p_metadata jsonb default '{}')
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_batch_id uuid;
begin
    if p_name is null or btrim(p_name) = '' then
        raise exception 'create_import_batch: p_name is required' using errcode = '22023';
    end if;
    insert into import_batches (name, metadata) values (p_name, coalesce(p_metadata, '{}'))
    returning id into v_batch_id;
    return jsonb_build_object('ok', true, 'batch_id', v_batch_id);
end;
$$;

create function refresh_import_batch_status(p_batch_id uuid)
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
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'batch_not_found');
    end if;

    return jsonb_build_object('ok', true, 'batch_id', p_batch_id, 'status', v_status,
        'total', v_total, 'completed', v_completed, 'failed', v_failed, 'open', v_open);
end;
$$;

create function enqueue_ingestion_job(
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
    insert into ingestion_jobs (document_id, batch_id, kind, max_attempts)
    values (p_document_id, p_batch_id, p_kind, p_max_attempts)
    returning id into v_job_id;

    if p_batch_id is not null then
        perform refresh_import_batch_status(p_batch_id);
    end if;
    return jsonb_build_object('ok', true, 'job_id', v_job_id);
end;
$$;

create function claim_ingestion_jobs(
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
    committed_generation_id uuid
)
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
begin
    if p_worker_id is null or btrim(p_worker_id) = '' then
        raise exception 'claim_ingestion_jobs: p_worker_id is required' using errcode = '22023';
    end if;

    return query
    with candidates as (
        select j.id
          from ingestion_jobs j
          join documents d on d.id = j.document_id
         where j.attempt_count < j.max_attempts
           and ((j.status = 'pending' and j.next_run_at <= now())
             or (j.status = 'processing'
                 -- a worker id never reclaims its own stale job: both runs would pass the fence
                 and j.locked_by is distinct from p_worker_id
                 and j.locked_at < now() - make_interval(secs => p_stale_after_seconds)))
         order by j.next_run_at, j.created_at
         limit greatest(p_claim_limit, 0)
           for update of j, d skip locked
    ), claimed as (
        update ingestion_jobs j
           set status = 'processing',
               stage = 'claimed',
               progress = 0,
               attempt_count = j.attempt_count + 1,
               locked_by = p_worker_id,
               locked_at = now(),
               started_at = coalesce(j.started_at, now()),
               updated_at = now()
          from candidates c
         where j.id = c.id
        returning j.id, j.document_id, j.batch_id, j.kind, j.attempt_count, j.max_attempts,
                  j.locked_by, j.locked_at
    ), touched as (
        -- An indexed document stays indexed (and readable) while it is rebuilt.
        update documents d
           set status = case when d.index_generation_id is null then 'processing' else d.status end,
               updated_at = now()
          from claimed c
         where d.id = c.document_id
        returning d.id, d.source_name, d.mime_type, d.content_sha256, d.byte_size, d.index_generation_id
    )
    select c.id, c.document_id, c.batch_id, c.kind, c.attempt_count, c.max_attempts,
           c.locked_by, c.locked_at, t.source_name, t.mime_type, t.content_sha256, t.byte_size,
           t.index_generation_id
      from claimed c
      join touched t on t.id = c.document_id;
end;
$$;

create function begin_document_index_generation(p_job_id uuid, p_document_id uuid, p_worker_id text)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_generation_id uuid;
begin
    insert into index_generations (document_id, job_id, worker_id)
    values (p_document_id, p_job_id, p_worker_id)
    returning id into v_generation_id;
    return jsonb_build_object('ok', true, 'generation_id', v_generation_id);
end;
$$;

-- Naive: trusts client-computed counts (from p_metadata) and replaces metadata wholesale.
create function commit_document_index_generation(
    p_job_id uuid,
    p_document_id uuid,
    p_generation_id uuid,
    p_metadata jsonb default '{}'
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
begin
    update index_generations
       set status = 'superseded'
     where document_id = p_document_id and status = 'committed' and id <> p_generation_id;

    update index_generations
       set status = 'committed',
           committed_at = now(),
           page_count = coalesce((p_metadata ->> 'page_count')::integer, 0),
           section_count = coalesce((p_metadata ->> 'section_count')::integer, 0),
           chunk_count = coalesce((p_metadata ->> 'chunk_count')::integer, 0)
     where id = p_generation_id;

    update documents
       set index_generation_id = p_generation_id,
           status = 'indexed',
           error_message = null,
           page_count = coalesce((p_metadata ->> 'page_count')::integer, 0),
           section_count = coalesce((p_metadata ->> 'section_count')::integer, 0),
           chunk_count = coalesce((p_metadata ->> 'chunk_count')::integer, 0),
           title = coalesce(p_metadata ->> 'title', title),
           metadata = p_metadata,
           updated_at = now()
     where id = p_document_id;
    return jsonb_build_object('ok', true, 'generation_id', p_generation_id);
end;
$$;

-- Naive: no fence, 4 arguments.
create function complete_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_batch_id uuid default null,
    p_stage text default 'indexed'
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_batch_id uuid;
begin
    update ingestion_jobs
       set status = 'completed', stage = p_stage, progress = 100, completed_at = now(),
           locked_by = null, locked_at = null, error_message = null, updated_at = now()
     where id = p_job_id
    returning batch_id into v_batch_id;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found');
    end if;

    update ingestion_jobs
       set status = 'completed', stage = 'superseded', completed_at = now(), updated_at = now()
     where document_id = p_document_id and id <> p_job_id and status in ('pending', 'processing', 'failed');

    update documents
       set status = case when index_generation_id is not null then 'indexed' else status end,
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'job_id', p_job_id,
        'batch', refresh_import_batch_status(coalesce(p_batch_id, v_batch_id)));
end;
$$;

-- Naive: no fence, 8 arguments, no attempt clamp, demotes indexed documents.
create function fail_or_retry_ingestion_job(
    p_job_id uuid,
    p_document_id uuid,
    p_batch_id uuid default null,
    p_retry boolean default false,
    p_document_status text default 'failed',
    p_stage text default 'failed',
    p_error_message text default null,
    p_next_run_at timestamptz default null
)
returns jsonb
language plpgsql
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_batch_id uuid;
begin
    if p_retry then
        update ingestion_jobs
           set status = 'pending', stage = p_stage, next_run_at = coalesce(p_next_run_at, now()),
               locked_by = null, locked_at = null, error_message = p_error_message, updated_at = now()
         where id = p_job_id
        returning batch_id into v_batch_id;
    else
        update ingestion_jobs
           set status = 'failed', stage = p_stage, completed_at = now(),
               locked_by = null, locked_at = null, error_message = p_error_message, updated_at = now()
         where id = p_job_id
        returning batch_id into v_batch_id;
    end if;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found');
    end if;

    -- Reset the document for a rebuild: its committed index is dropped.
    update index_generations set status = 'abandoned'
     where document_id = p_document_id and status = 'committed';
    update documents
       set status = case when p_retry then 'queued' else p_document_status end,
           error_message = p_error_message,
           index_generation_id = null,
           page_count = 0, section_count = 0, chunk_count = 0,
           updated_at = now()
     where id = p_document_id;

    return jsonb_build_object('ok', true, 'job_id', p_job_id, 'retried', p_retry,
        'batch', refresh_import_batch_status(coalesce(p_batch_id, v_batch_id)));
end;
$$;

-- Naive: "no open job" is checked only when choosing candidate documents.
create function cleanup_abandoned_document_index_generations(
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
           and p.index_generation_id is distinct from d.index_generation_id;
        get diagnostics v_pages = row_count;
        delete from document_sections s using documents d
         where d.id = s.document_id and s.document_id = any (v_documents)
           and s.index_generation_id is distinct from d.index_generation_id;
        get diagnostics v_sections = row_count;
        delete from document_chunks c using documents d
         where d.id = c.document_id and c.document_id = any (v_documents)
           and c.index_generation_id is distinct from d.index_generation_id;
        get diagnostics v_chunks = row_count;
        delete from index_generations g using documents d
         where d.id = g.document_id and g.document_id = any (v_documents)
           and g.status <> 'committed' and g.id is distinct from d.index_generation_id;
        get diagnostics v_generations = row_count;
    end if;

    return jsonb_build_object('ok', true, 'dry_run', p_dry_run,
        'documents', coalesce(array_length(v_documents, 1), 0),
        'pages', v_pages, 'sections', v_sections, 'chunks', v_chunks, 'generations', v_generations);
end;
$$;
