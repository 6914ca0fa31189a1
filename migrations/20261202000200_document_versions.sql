-- Documents that follow their source (issue 31; docs/state-machine.md, "Versions"): a
-- document is identified by (collection, source key), a changed file is a new version of
-- the same document, and the latest version always wins.
--
-- Expand/contract: the previous release keeps working on this schema. Its enqueue inserts
-- keyless, content-addressed documents (`on conflict (content_sha256) where deleted_at is
-- null`), so that unique index stays and keyed documents keep their bytes' hash on their
-- versions instead (documents.content_sha256 is null for them: NULLs never collide). Its
-- workers claim, build and acknowledge as before; the version fence below holds for their
-- builds too, because it is checked by the server on the generation, which the server
-- labels with the job's version.
--
-- THE VERSION FENCE. A job builds one version of its document (ingestion_jobs.
-- document_version), and the generation it begins carries that version. A generation
-- commits only if its version is still the document's latest (generation_refusal:
-- `version_superseded`). A newer version enqueued while an older one is pending or being
-- built cancels the older job (stage `superseded`) in the transaction that makes the new
-- version, under THE LOCK ORDER (job, generations, document, batches): the older build is
-- refused from then on by every fenced call (its job is no longer processing) and by the
-- artifact fence, and its building generation is abandoned. An indexed document stays
-- indexed, at its last committed version, until the newer version commits (R15), so there
-- is no gap and no duplicate. A retry of a job whose version was superseded is refused
-- (`superseded`).
--
-- What this fixes, each with its test (tests/race/test_versions.py): a changed file was a
-- second document and the stale copy stayed searchable; a new version racing a build, a
-- delete, or two more versions; the operator's retry of a superseded job.

-- The key. `collection` is a name (the next issues build tenants and sources on it).
alter table public.documents
    add column collection text not null default 'default',
    add column source_key text,
    add column version integer,
    add column indexed_version integer;
-- Keyed documents carry their hash on their versions. The previous release's writers always
-- set it and its readers read it only through claim_ingestion_jobs, which fills it in.
-- squawk-ignore ban-drop-not-null
alter table public.documents alter column content_sha256 drop not null;
alter table public.documents
    add constraint documents_collection_check check (collection <> '') not valid,
    add constraint documents_source_key_check check (source_key <> '') not valid,
    -- a keyed document has versions (and no content hash of its own); a keyless one has a hash
    add constraint documents_key_versions_check
        check ((source_key is null) = (version is null)
               and (source_key is not null or content_sha256 is not null)) not valid;

-- Every version of a document: what the source held, when it was enqueued. Only the latest
-- version's bytes are kept (document_sources, replaced by the enqueue of a new version);
-- what became of each version is read off its jobs (document_history).
create table public.document_versions (
    document_id uuid not null references public.documents (id) on delete cascade,
    version integer not null check (version >= 1),
    content_sha256 text not null check (content_sha256 ~ '^[0-9a-f]{64}$'),
    byte_size bigint not null check (byte_size >= 0),
    mime_type text,
    source_name text not null,
    source_modified_at timestamptz,
    source_etag text,
    enqueued_at timestamptz not null default now(),
    primary key (document_id, version)
);
revoke all on table public.document_versions from public;
grant select on table public.document_versions to ingestion_worker;
-- Supabase's default privileges hand anon/authenticated every new table in public: take
-- them back (…_harden_state_rpcs.sql).
do $$
declare
    v_role text;
begin
    foreach v_role in array array['anon', 'authenticated'] loop
        if exists (select 1 from pg_roles where rolname = v_role) then
            execute format('revoke all on table public.document_versions from %I', v_role);
        end if;
    end loop;
end;
$$;

alter table public.ingestion_jobs add column document_version integer;
alter table public.index_generations add column document_version integer;

-- squawk-ignore ban-drop-function
drop function public.claim_ingestion_jobs(text, integer, integer);

-- The claim returns the key and the version it builds (a previous release's client ignores
-- the columns it does not know).
create function public.claim_ingestion_jobs(p_worker_id text, p_claim_limit integer default 1,
                                            p_stale_after_seconds integer default 300)
returns table (job_id uuid, document_id uuid, batch_id uuid, kind text, attempt_count integer,
               max_attempts integer, locked_by text, locked_at timestamptz, source_name text, mime_type text,
               content_sha256 text, byte_size bigint, committed_generation_id uuid, lease_token bigint,
               lease_expires_at timestamptz, collection text, source_key text, document_version integer)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    if p_worker_id is null or btrim(p_worker_id) = '' then
        raise exception 'claim_ingestion_jobs: p_worker_id is required' using errcode = '22023';
    end if;
    if p_stale_after_seconds is null or p_stale_after_seconds < 1 then
        raise exception 'claim_ingestion_jobs: p_stale_after_seconds must be at least 1' using errcode = '22023';
    end if;

    return query
    -- Two branches, each walking its own partial index in claim order and locking as it
    -- goes, so a claim costs O(limit) however long the backlog.
    with pending as (
        select j.id, j.next_run_at, j.created_at
          from public.ingestion_jobs j
          join public.documents d on d.id = j.document_id
         where j.status = 'pending' and j.next_run_at <= now() and j.attempt_count < j.max_attempts
         order by j.next_run_at, j.created_at
         limit greatest(p_claim_limit, 0)
           for update of j, d skip locked
    ), stale as (
        select j.id, j.next_run_at, j.created_at
          from public.ingestion_jobs j
          join public.documents d on d.id = j.document_id
         where j.status = 'processing'
           and j.lease_expires_at < now()
           -- kept for worker-id callers: a worker id never reclaims its own stale job
           and j.locked_by is distinct from p_worker_id
           and j.attempt_count < j.max_attempts
         order by j.lease_expires_at
         limit greatest(p_claim_limit, 0)
           for update of j, d skip locked
    ), candidates as (
        select c.id from (select * from pending union all select * from stale) c
         order by c.next_run_at, c.created_at
         limit greatest(p_claim_limit, 0)
    ), claimed as (
        update public.ingestion_jobs j
           set status = 'processing',
               stage = 'claimed',
               progress = 0,
               attempt_count = j.attempt_count + 1,
               lease_token = j.lease_token + 1,
               locked_by = p_worker_id,
               locked_at = now(),
               lease_seconds = p_stale_after_seconds,
               lease_expires_at = now() + make_interval(secs => p_stale_after_seconds),
               started_at = coalesce(j.started_at, now()),
               updated_at = now()
          from candidates c
         where j.id = c.id
        returning j.id, j.document_id, j.batch_id, j.kind, j.attempt_count, j.max_attempts,
                  j.locked_by, j.locked_at, j.lease_token, j.lease_expires_at, j.document_version
    ), touched as (
        -- An indexed document stays indexed (and readable) while it is rebuilt.
        update public.documents d
           set status = case when d.index_generation_id is null then 'processing' else d.status end,
               updated_at = now()
          from claimed c
         where d.id = c.document_id
        returning d.id, d.source_name, d.mime_type, d.content_sha256, d.byte_size, d.index_generation_id,
                  d.collection, d.source_key
    )
    select c.id, c.document_id, c.batch_id, c.kind, c.attempt_count, c.max_attempts,
           c.locked_by, c.locked_at, t.source_name, t.mime_type,
           coalesce(t.content_sha256, v.content_sha256), coalesce(v.byte_size, t.byte_size),
           t.index_generation_id, c.lease_token, c.lease_expires_at, t.collection, t.source_key, c.document_version
      from claimed c
      join touched t on t.id = c.document_id
      left join public.document_versions v on v.document_id = c.document_id and v.version = c.document_version;
end;
$$;

-- A generation carries the version its job builds.
create or replace function public.begin_document_index_generation(p_job_id uuid, p_document_id uuid,
                                                                  p_worker_id text, p_lease_token bigint default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal jsonb;
    v_generation_id uuid;
begin
    v_refusal := public.lock_fenced_ingestion_job(p_job_id, p_document_id, p_worker_id, p_lease_token);
    if v_refusal is not null then
        return v_refusal;
    end if;
    insert into public.index_generations (document_id, job_id, worker_id, lease_token, document_version)
    select p_document_id, p_job_id, p_worker_id, j.lease_token, j.document_version
      from public.ingestion_jobs j where j.id = p_job_id
    returning id into v_generation_id;
    return jsonb_build_object('ok', true, 'generation_id', v_generation_id);
end;
$$;

-- THE VERSION FENCE, at commit: read after the generation rows are locked (phase 2); a new
-- version changes documents.version only after locking the job and the generations this
-- commit holds, so the two serialize.
create or replace function public.generation_refusal(p_job_id uuid, p_document_id uuid, p_generation_id uuid)
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select case
        when g.id is null then jsonb_build_object('ok', false, 'reason', 'generation_not_found')
        when g.job_id is distinct from p_job_id or g.lease_token is distinct from j.lease_token
            then jsonb_build_object('ok', false, 'reason', 'generation_not_owned')
        when g.status <> 'building'
            then jsonb_build_object('ok', false, 'reason', 'generation_not_building', 'status', g.status)
        when g.document_version is distinct from d.version and d.version is not null
            then jsonb_build_object('ok', false, 'reason', 'version_superseded',
                                    'version', g.document_version, 'latest_version', d.version)
    end
      from (select 1) one
      left join public.index_generations g on g.id = p_generation_id and g.document_id = p_document_id
      left join public.ingestion_jobs j on j.id = p_job_id
      left join public.documents d on d.id = p_document_id;
$$;

-- The committed generation's version becomes the document's indexed version.
create or replace function public.apply_generation_commit(p_document_id uuid, p_generation_id uuid, p_metadata jsonb)
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

-- IF002 for an enqueue into a cancelled batch (…_cancelled_batches_take_no_files.sql). Called
-- after the batch row is updated (so locked until commit, and a cancel still running was
-- waited for): a new statement sees a cancel that committed before.
create function public.refuse_cancelled_batch(p_batch_id uuid) returns void
language plpgsql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_batch_id is not null
       and exists (select 1 from public.import_batches where id = p_batch_id and cancelled_at is not null) then
        raise exception 'import batch % was cancelled: it takes no new files', p_batch_id
            using errcode = 'IF002',
                  hint = 'Enqueue into a new batch; the files added before the cancel stay as they are.';
    end if;
end;
$$;

-- A job enqueued for a document (a reindex, a retry after a failure) builds its latest version.
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
    v_version integer;
begin
    select version into v_version from public.documents
     where id = p_document_id and deleted_at is null for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'document_not_found');
    end if;

    -- The open job we collide with may finish between the insert and the look-up: retry.
    for attempt in 1..3 loop
        insert into public.ingestion_jobs (document_id, batch_id, kind, max_attempts, document_version)
        values (p_document_id, p_batch_id, p_kind, p_max_attempts, v_version)
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
    perform public.refuse_cancelled_batch(p_batch_id);
    return jsonb_build_object('ok', true, 'job_id', v_job_id, 'batch', v_batches -> 0);
end;
$$;

-- The enqueue of a source's bytes under its key. Outcomes:
--   new             no live document had the key: version 1, a job;
--   new_version     the bytes differ from the latest version's: version n+1, a job; an open
--                   job of an older version is cancelled (`superseded_job_id`);
--   unchanged       the latest version's bytes, indexed or failed for good: nothing queued;
--   already_queued  the latest version's bytes, its job is open: nothing queued;
--   retried         the latest version's bytes, its build failed and no job is open: a job;
--   reindex_queued  p_reindex and the latest version's bytes: a reindex job.
-- A live keyless document (indexed before keys existed) of the collection with the same
-- bytes adopts the key as its version 1 (`adopted`), so an upgrade indexes nothing twice.
-- `store_bytes`: the caller writes the bytes (document_sources, replacing the older
-- version's) in this transaction. THE LOCK ORDER: the open job, its generations, the
-- document, the batches; raises IF002 for a cancelled batch (the transaction rolls back).
create function public.enqueue_document_version(
    p_collection text, p_source_key text, p_source_name text, p_content_sha256 text, p_byte_size bigint,
    p_mime_type text default null, p_batch_id uuid default null, p_max_attempts integer default 3,
    p_reindex boolean default false, p_source_modified_at timestamptz default null,
    p_source_etag text default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_document public.documents%rowtype;
    v_latest public.document_versions%rowtype;
    v_open public.ingestion_jobs%rowtype;
    v_open_now uuid;
    v_document_id uuid;
    v_adopted boolean := false;
    v_settled boolean := false;
    v_outcome text;
    v_version integer;
    v_kind text := 'index';
    v_job_id uuid;
    v_superseded uuid;
    v_batches jsonb := '[]'::jsonb;
    v_batch record;
begin
    if p_collection is null or p_collection = '' or p_source_key is null or p_source_key = '' then
        raise exception 'enqueue_document_version: p_collection and p_source_key are required'
            using errcode = '22023';
    end if;
    if p_content_sha256 is null or p_content_sha256 !~ '^[0-9a-f]{64}$' or p_byte_size is null or p_byte_size < 0
       or p_source_name is null then
        raise exception 'enqueue_document_version: p_source_name, p_content_sha256 (hex sha-256) and p_byte_size '
                        '(>= 0) are required' using errcode = '22023';
    end if;

    for attempt in 1..5 loop
        begin
            v_document := null;
            v_open := null;
            v_adopted := false;
            select id into v_document_id from public.documents
             where collection = p_collection and source_key = p_source_key and deleted_at is null;
            if v_document_id is null then
                select id into v_document_id from public.documents
                 where collection = p_collection and source_key is null and deleted_at is null
                   and content_sha256 = p_content_sha256
                 order by created_at, id
                 limit 1;
                v_adopted := v_document_id is not null;
            end if;
            if v_document_id is null then
                -- A new document: nothing to lock before it. Two enqueues of one new key meet
                -- on the unique index; the loser starts again and finds the winner's row.
                insert into public.documents (batch_id, collection, source_key, source_name, mime_type,
                                              content_sha256, byte_size, version)
                values (p_batch_id, p_collection, p_source_key, p_source_name, p_mime_type, null, p_byte_size, 0)
                on conflict (collection, source_key) where deleted_at is null and source_key is not null do nothing
                returning * into v_document;
                if v_document.id is null then
                    raise exception 'key taken meanwhile' using errcode = 'IF003';
                end if;
                v_settled := true;
                exit;
            end if;
            -- THE LOCK ORDER: the open job, its building generations, then the document.
            select * into v_open from public.ingestion_jobs
             where document_id = v_document_id and status in ('pending', 'processing')
               for no key update;
            perform 1 from public.index_generations
             where job_id = v_open.id and status = 'building'
             order by id
               for no key update;
            select * into v_document from public.documents where id = v_document_id for no key update;
            select id into v_open_now from public.ingestion_jobs
             where document_id = v_document_id and status in ('pending', 'processing');
            if v_open_now is distinct from v_open.id or v_document.deleted_at is not null
               or (v_adopted and v_document.source_key is not null)
               or (not v_adopted and v_document.source_key is distinct from p_source_key) then
                -- An enqueue or a delete committed while we looked (its lock is what we waited
                -- for): undo this attempt's locks and look again.
                raise exception 'document changed' using errcode = 'IF003';
            end if;
            v_settled := true;
            exit;
        exception when sqlstate 'IF003' then
            v_document_id := null;
        end;
    end loop;
    if not v_settled then
        return jsonb_build_object('ok', false, 'reason', 'contended', 'source_key', p_source_key);
    end if;

    if v_adopted then
        insert into public.document_versions (document_id, version, content_sha256, byte_size, mime_type,
                                              source_name, source_modified_at, source_etag, enqueued_at)
        values (v_document.id, 1, v_document.content_sha256, v_document.byte_size, v_document.mime_type,
                p_source_name, p_source_modified_at, p_source_etag, v_document.created_at);
        update public.documents
           set source_key = p_source_key, version = 1, content_sha256 = null, source_name = p_source_name,
               indexed_version = case when index_generation_id is not null then 1 end, updated_at = now()
         where id = v_document.id
        returning * into v_document;
        update public.ingestion_jobs set document_version = 1 where id = v_open.id;
        v_open.document_version := 1;
    end if;

    select * into v_latest from public.document_versions
     where document_id = v_document.id and version = v_document.version;

    if v_document.version = 0 then
        v_outcome := 'new';
    elsif v_latest.content_sha256 is distinct from p_content_sha256 then
        v_outcome := 'new_version';
    elsif v_open.id is not null then
        v_outcome := 'already_queued';
    elsif p_reindex and v_document.index_generation_id is not null then
        v_outcome := 'reindex_queued';
        v_kind := 'reindex';
    elsif v_document.indexed_version is distinct from v_document.version
          and not exists (select 1 from public.ingestion_jobs j
                           where j.document_id = v_document.id and j.document_version = v_document.version
                             and j.status = 'completed') then
        v_outcome := 'retried';
    else
        v_outcome := 'unchanged';
    end if;

    if v_outcome in ('unchanged', 'already_queued') then
        return jsonb_build_object('ok', true, 'outcome', v_outcome, 'document_id', v_document.id,
            'version', v_document.version, 'job_id', v_open.id, 'adopted', v_adopted, 'store_bytes', false);
    end if;

    v_version := v_document.version;
    if v_outcome in ('new', 'new_version') then
        v_version := v_document.version + 1;
        if v_open.id is not null then
            -- The older version's job: cancelled (its build is refused from now on), its
            -- building generation abandoned. The document stays as it is until the new
            -- version commits (an indexed one stays indexed).
            perform public.cancel_locked_ingestion_jobs(array[v_open.id],
                format('superseded by version %s', v_version), v_document.status);
            update public.ingestion_jobs set stage = 'superseded' where id = v_open.id;
            v_superseded := v_open.id;
        end if;
        insert into public.document_versions (document_id, version, content_sha256, byte_size, mime_type,
                                              source_name, source_modified_at, source_etag)
        values (v_document.id, v_version, p_content_sha256, p_byte_size, p_mime_type, p_source_name,
                p_source_modified_at, p_source_etag);
    end if;

    insert into public.ingestion_jobs (document_id, batch_id, kind, max_attempts, document_version)
    values (v_document.id, p_batch_id, v_kind, p_max_attempts, v_version)
    returning id into v_job_id;
    update public.documents
       set version = v_version, byte_size = p_byte_size, mime_type = p_mime_type, source_name = p_source_name,
           status = case when index_generation_id is null then 'queued' else status end,
           error_message = case when index_generation_id is null then null else error_message end,
           updated_at = now()
     where id = v_document.id;

    -- Batch rows last, in id order: the superseded job's (cancelled) and this one's.
    for v_batch in
        select b.batch_id, b.cancelled
          from (select p_batch_id as batch_id, 0 as cancelled
                union all
                select j.batch_id, 1 from public.ingestion_jobs j where j.id = v_superseded) b
         where b.batch_id is not null
         order by b.batch_id, b.cancelled
    loop
        if v_batch.cancelled = 1 then
            v_batches := v_batches || coalesce(jsonb_build_array(
                public.cancel_import_batch_counters(v_batch.batch_id, 1)), '[]'::jsonb);
        else
            v_batches := v_batches || public.move_import_batch_counters(
                array[row(v_batch.batch_id, 1, 1, 0, 0)::public.import_batch_delta]);
        end if;
    end loop;
    perform public.refuse_cancelled_batch(p_batch_id);
    return jsonb_build_object('ok', true, 'outcome', v_outcome, 'document_id', v_document.id,
        'version', v_version, 'job_id', v_job_id, 'superseded_job_id', v_superseded, 'adopted', v_adopted,
        'store_bytes', v_outcome in ('new', 'new_version'), 'batches', v_batches);
end;
$$;

-- The operator's retry refuses a job whose version was superseded (`superseded`): the newer
-- version is what gets built. Otherwise as in …_one_lock_order.sql.
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
                and exists (select 1 from public.documents d where d.id = j.document_id and d.deleted_at is null
                             and (j.document_version is null or d.version is null or j.document_version = d.version))
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
                    when j.document_version is distinct from d.version and d.version is not null then 'superseded'
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

-- `ingest status`: each failure names its document's key and the version that failed.
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
                               'source_name', d.source_name, 'collection', d.collection,
                               'source_key', d.source_key, 'version', j.document_version, 'attempt_count', j.attempt_count,
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

-- `ingest show`: a document (by id, or by collection and key among the live ones), its
-- versions (newest first) and each version's jobs. What became of a version is read off its
-- latest job: indexed (the committed version), replaced (indexed, then a newer version
-- was), building, queued, failed (with the error), superseded (a newer version took over
-- before it committed) or cancelled. Jobs from before keys count as version 1.
create function public.document_history(p_document_id uuid default null, p_collection text default 'default',
                                        p_source_key text default null)
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    with document as (
        select d.* from public.documents d
         where (p_document_id is not null and d.id = p_document_id)
            or (p_document_id is null and d.collection = p_collection and d.source_key = p_source_key
                and d.deleted_at is null)
         order by d.created_at desc
         limit 1
    ), jobs as (
        select coalesce(j.document_version, 1) as version, j.*,
               row_number() over (partition by coalesce(j.document_version, 1)
                                  order by j.created_at desc, j.id desc) as newest
          from public.ingestion_jobs j join document d on d.id = j.document_id
    ), versions as (
        select v.*,
               case when v.version = d.indexed_version then 'indexed'
                    when l.status = 'completed' then 'replaced'
                    when l.status = 'processing' then 'building'
                    when l.status = 'pending' then 'queued'
                    when l.status = 'failed' then 'failed'
                    when l.status = 'cancelled' and l.stage = 'superseded' then 'superseded'
                    when l.status = 'cancelled' then 'cancelled'
               end as outcome,
               case when l.status in ('failed', 'cancelled') then l.error_message end as error_message
          from public.document_versions v
          join document d on d.id = v.document_id
          left join jobs l on l.version = v.version and l.newest = 1
    )
    select case when not exists (select 1 from document)
                then jsonb_build_object('ok', false, 'reason', 'not_found')
           else jsonb_build_object(
        'ok', true,
        'document', (select jsonb_build_object(
            'document_id', d.id, 'collection', d.collection, 'source_key', d.source_key,
            'source_name', d.source_name, 'title', d.title, 'status', d.status, 'version', d.version,
            'indexed_version', d.indexed_version, 'content_sha256', d.content_sha256, 'byte_size', d.byte_size,
            'chunk_count', d.chunk_count, 'created_at', d.created_at, 'deleted_at', d.deleted_at)
            from document d),
        'versions', coalesce((select jsonb_agg(jsonb_build_object(
            'version', v.version, 'content_sha256', v.content_sha256, 'byte_size', v.byte_size,
            'mime_type', v.mime_type, 'source_name', v.source_name, 'source_modified_at', v.source_modified_at,
            'source_etag', v.source_etag, 'enqueued_at', v.enqueued_at, 'outcome', v.outcome,
            'error_message', v.error_message,
            'jobs', coalesce((select jsonb_agg(jsonb_build_object(
                'job_id', j.id, 'kind', j.kind, 'status', j.status, 'stage', j.stage,
                'attempt_count', j.attempt_count, 'batch_id', j.batch_id, 'error_message', j.error_message,
                'created_at', j.created_at, 'completed_at', j.completed_at) order by j.created_at, j.id)
                from jobs j where j.version = v.version), '[]'::jsonb))
            order by v.version desc) from versions v), '[]'::jsonb)) end;
$$;

select public.secure_rpc('public.refuse_cancelled_batch(uuid)', false);
select public.secure_rpc('public.claim_ingestion_jobs(text, integer, integer)');
select public.secure_rpc('public.begin_document_index_generation(uuid, uuid, text, bigint)');
select public.secure_rpc('public.generation_refusal(uuid, uuid, uuid)', false);
select public.secure_rpc('public.apply_generation_commit(uuid, uuid, jsonb)', false);
select public.secure_rpc('public.enqueue_ingestion_job(uuid, uuid, text, integer)');
select public.secure_rpc('public.enqueue_document_version(text, text, text, text, bigint, text, uuid, integer, '
                         'boolean, timestamptz, text)');
select public.secure_rpc('public.retry_failed_ingestion_jobs(uuid[], uuid)');
select public.secure_rpc('public.ingestion_batch_report(uuid, integer)');
select public.secure_rpc('public.document_history(uuid, text, text)');
