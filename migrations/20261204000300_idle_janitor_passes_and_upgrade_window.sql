-- Janitor passes that cost what they find, and two holes of the upgrade window (issue 44,
-- defects 5, 8 and 10; docs/state-machine.md "Versions", docs/search.md "Term statistics",
-- docs/operations.md "The janitor" and "`ingest health`").
--
-- 5. With nothing to do, compact_search_term_counts grouped every row of search_term_counts
--    and cleanup_kept_version_bytes joined every kept version to its document. Now:
--    * a row a writer appends is `folded = false` (the column's default, so the trigger that
--      writes them is unchanged); the compaction writes each key's sum as one `folded` row.
--      It picks keys from the partial index of unfolded rows (…_indexes.sql), so a pass
--      reads the rows appended since the last one, and nothing when none were. Rows that
--      were there before this migration read as unfolded: the first pass folds them all once.
--    * documents.oldest_kept_version (the lowest version whose bytes are kept, null when none
--      are) is kept by statement triggers on document_version_sources. A document owes kept
--      bytes under keep N exactly when it is deleted (or keyless) and has some, or when
--      `version - oldest_kept_version >= N`: owed_kept_version_bytes finds those documents
--      through two partial indexes (…_indexes.sql), then their owed versions through the
--      primary key.
-- 8. A keyless document adopting its file's key while its build is in flight: the adoption set
--    the document's and the job's version to 1, not the building generation's, so the version
--    fence refused the build's commit (`version_superseded`) and the document ended failed.
--    enqueue_document_version now labels the open job's building generations too.
-- 10. The previous release's enqueue inserts a keyless document `on conflict (content_sha256)
--    where deleted_at is null do nothing`, then looks the live document up by that hash. Keyed
--    documents keep their hash on their versions (documents.content_sha256 null), so a file
--    indexed by key got a second, keyless live copy: search returned it twice, forever. A
--    BEFORE INSERT trigger on keyless rows now finds the live keyed document of the same
--    collection whose latest version has those bytes and writes the hash on it: the insert
--    then meets it on the unique index (no row), and the old client's look-up finds it, so it
--    reports the file a duplicate (or, when that document failed, queues its latest version,
--    as it did for any failed duplicate). The hash stays only while it names the latest
--    version: enqueue_document_version clears it with every new version. Copies made before
--    this migration are counted by ingestion_queue_health (`keyless_duplicates`, the check
--    `no_duplicate_documents` of `ingest health`).
--
-- Expand/contract: new columns with defaults that need no rewrite, triggers, and replaced
-- functions with unchanged signatures; the previous release's clients call the same RPCs and
-- ignore the new health keys.

-- ---------------------------------------------------------------------------------------
-- 5. Term counts: only unfolded rows are compacted.

-- A constant default: no table rewrite; existing rows read as unfolded.
alter table public.search_term_counts add column folded boolean not null default false;

-- Folds the rows of up to p_limit keys (collection, lexeme) that have an unfolded row, in key
-- order, into one folded row each, dropping sums that reached zero. It reads the unfolded
-- rows of the keys it picks (the partial index search_term_counts_unfolded) and every row
-- of those keys; a key whose rows are all folded is not read. Writers keep appending
-- meanwhile: a row committed after this statement's snapshot is neither read nor deleted
-- here (it stays unfolded for the next pass), and a row another compaction deleted first is
-- skipped, so each sum written is of exactly the rows this pass deleted. Returns the rows
-- removed and written.
create or replace function public.compact_search_term_counts(p_limit integer default 10000)
returns jsonb
language plpgsql
set search_path = pg_catalog, pg_temp
set enable_seqscan = off  -- the keys come from the partial index, whatever the estimates say
as $$
declare
    v_removed bigint;
    v_written bigint;
begin
    if p_limit is null or p_limit < 1 then
        raise exception 'compact_search_term_counts: p_limit must be at least 1' using errcode = '22023';
    end if;
    with picked as (
        select t.collection, t.lexeme
          from public.search_term_counts t
         where not t.folded
         group by t.collection, t.lexeme
         order by t.collection, t.lexeme
         limit p_limit
    ), removed as (
        delete from public.search_term_counts t
         using picked p
         where t.lexeme = p.lexeme and t.collection = p.collection
        returning t.collection, t.lexeme, t.documents, t.chunks
    ), written as (
        insert into public.search_term_counts (collection, lexeme, documents, chunks, folded)
        select r.collection, r.lexeme, sum(r.documents), sum(r.chunks), true
          from removed r
         group by r.collection, r.lexeme
        having sum(r.documents) <> 0 or sum(r.chunks) <> 0
        returning 1
    )
    select (select count(*) from removed), (select count(*) from written) into v_removed, v_written;
    return jsonb_build_object('ok', true, 'removed', v_removed, 'written', v_written);
end;
$$;

-- ---------------------------------------------------------------------------------------
-- 5. Kept bytes: found from the documents that owe some.

alter table public.documents add column oldest_kept_version integer;

-- The lowest kept version of each document whose kept bytes a statement inserted or deleted
-- (the enqueue that keeps a replaced version's bytes; the cleanup; the cascade of a version's
-- delete). Documents locked in id order, as everywhere (THE LOCK ORDER: the enqueue already
-- holds its document; the cleanup holds nothing else).
create function public.track_oldest_kept_version()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
set enable_seqscan = off  -- its documents by primary key, whatever the estimates say
as $$
declare
    v_ids uuid[];
begin
    if tg_op = 'INSERT' then
        v_ids := array(select distinct n.document_id from kept_rows n order by 1);
    else
        v_ids := array(select distinct o.document_id from gone_rows o order by 1);
    end if;
    if cardinality(v_ids) = 0 then
        return null;  -- a cleanup pass that found nothing owed
    end if;
    perform 1 from public.documents d where d.id = any (v_ids) order by d.id for no key update;
    update public.documents d
       set oldest_kept_version = (select min(k.version) from public.document_version_sources k
                                   where k.document_id = d.id)
     where d.id = any (v_ids)
       and d.oldest_kept_version is distinct from (select min(k.version) from public.document_version_sources k
                                                    where k.document_id = d.id);
    return null;
end;
$$;

create trigger document_version_sources_kept
    after insert on public.document_version_sources
    referencing new table as kept_rows
    for each statement execute function public.track_oldest_kept_version();
create trigger document_version_sources_gone
    after delete on public.document_version_sources
    referencing old table as gone_rows
    for each statement execute function public.track_oldest_kept_version();

-- The documents that have kept bytes now (this migration's transaction holds the rows).
update public.documents d
   set oldest_kept_version = k.version
  from (select document_id, min(version) as version from public.document_version_sources group by document_id) k
 where d.id = k.document_id;

-- Kept bytes that are owed: of a deleted (or keyless) document, or older than the newest
-- p_keep_versions versions (the latest's bytes, in document_sources, count as one); at most
-- p_limit, in key order. The cleanup and its dry run make the same choice through this. Its
-- documents come from the partial indexes of documents with kept bytes (…_indexes.sql): a
-- live one only when its oldest kept version is at least p_keep_versions behind its latest.
create or replace function public.owed_kept_version_bytes(p_keep_versions integer, p_limit integer)
returns table (document_id uuid, version integer)
language sql stable
security definer
set search_path = pg_catalog, pg_temp
set enable_seqscan = off  -- the documents come from the partial indexes, whatever the estimates say
set enable_bitmapscan = off  -- an index scan with the distance as its condition (a bitmap of the
                             -- partial index alone read every document with kept bytes on PG 15)
as $$
    with owing as (
        select d.id, d.version - p_keep_versions as up_to
          from public.documents d
         where d.oldest_kept_version is not null and d.deleted_at is null and d.version is not null
           and d.version - d.oldest_kept_version >= p_keep_versions
        union all
        select d.id, null
          from public.documents d
         where d.oldest_kept_version is not null and (d.deleted_at is not null or d.version is null)
    )
    select k.document_id, k.version
      from owing o
     cross join lateral (  -- each owing document's versions by primary key: offset 0 keeps the
                           -- planner from scanning every kept version to join them (PG 15 did)
           select k.document_id, k.version from public.document_version_sources k
            where k.document_id = o.id and (o.up_to is null or k.version <= o.up_to)
           offset 0) k
     order by k.document_id, k.version
     limit greatest(p_limit, 0);
$$;

-- The cleanup deletes (or, dry, counts) the owed versions by primary key, never by a scan of
-- every kept version that the planner may prefer on a small table.
alter function public.cleanup_kept_version_bytes(integer, integer, boolean) set enable_seqscan = off;
-- ... and joins them to the owed list one by one: a hash or merge join read every kept version
-- to join it to an empty list (PG 15's plan of the dry run).
alter function public.cleanup_kept_version_bytes(integer, integer, boolean) set enable_hashjoin = off;
alter function public.cleanup_kept_version_bytes(integer, integer, boolean) set enable_mergejoin = off;
-- The abandoned-generation cleanup's counts and deletes join each candidate's rows to its
-- document: with no candidate, a merge join still read a document (a plan autoanalyze chose).
alter function public.cleanup_abandoned_document_index_generations(uuid, integer, boolean) set enable_hashjoin = off;
alter function public.cleanup_abandoned_document_index_generations(uuid, integer, boolean) set enable_mergejoin = off;

-- ---------------------------------------------------------------------------------------
-- 8 and 10. The key's enqueue.

create or replace function public.enqueue_document_version(
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
        -- Its build in flight began its generation unversioned (as the job was): label it too,
        -- or the version fence refuses its commit (`version_superseded`). Locked above, in
        -- THE LOCK ORDER.
        update public.index_generations set document_version = 1
         where job_id = v_open.id and status = 'building';
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
           -- a hash the previous release's insert put here named the replaced version's bytes
           content_sha256 = case when v_version = version then content_sha256 end,
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

-- 10. The previous release's insert of a keyless document (see the top): when no live
-- document has its hash, the oldest live keyed document of its collection whose latest
-- version has those bytes takes the hash, so the insert meets it on documents_live_content_
-- sha256 and inserts nothing. The update re-checks, under the row's lock, that the version
-- is still the latest (a new version committed meanwhile: nothing is taken, the bytes are no
-- keyed document's any more and the insert goes on as the previous release meant). The
-- hash may be taken meanwhile by another keyless insert: then the insert meets that one.
create function public.keyless_insert_meets_keyed_copy()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_keyed uuid;
begin
    if exists (select 1 from public.documents d where d.content_sha256 = new.content_sha256 and d.deleted_at is null) then
        return new;
    end if;
    select d.id into v_keyed
      from public.document_versions v
      join public.documents d on d.id = v.document_id and d.version = v.version
     where v.content_sha256 = new.content_sha256 and d.collection = new.collection
       and d.source_key is not null and d.deleted_at is null
     order by d.created_at, d.id
     limit 1;
    if v_keyed is not null then
        begin
            update public.documents d
               set content_sha256 = new.content_sha256
              from public.document_versions v
             where d.id = v_keyed and v.document_id = d.id and v.version = d.version
               and v.content_sha256 = new.content_sha256 and d.deleted_at is null;
        exception when unique_violation then
            null;  -- a keyless insert of the same bytes committed first: the insert meets it
        end;
    end if;
    return new;
end;
$$;

create trigger documents_keyless_insert_meets_keyed_copy
    before insert on public.documents
    for each row when (new.source_key is null and new.content_sha256 is not null)
    execute function public.keyless_insert_meets_keyed_copy();

-- ---------------------------------------------------------------------------------------
-- 10. Health: the keyless copies made before this migration.

-- As in …_one_lock_order.sql, plus `keyless_duplicates`: live keyless documents whose bytes
-- are the latest version of a live keyed document of their collection (a previous release's
-- enqueue of a file already indexed by key), and the first 20 of their ids. It reads the
-- live documents that have a hash (keyless ones, and keyed ones the guard above wrote one
-- on), each looked up by hash among the versions.
create or replace function public.ingestion_queue_health(p_stale_after_seconds integer default 300)
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    with keyless_duplicates as (
        select k.id, k.created_at
          from public.documents k
         where k.content_sha256 is not null and k.deleted_at is null and k.source_key is null
           and exists (select 1
                         from public.document_versions v
                         join public.documents d on d.id = v.document_id and d.version = v.version
                        where v.content_sha256 = k.content_sha256 and d.collection = k.collection
                          and d.source_key is not null and d.deleted_at is null)
    )
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
                                           and g.id is distinct from d.index_generation_id),
        'keyless_duplicates', (select count(*) from keyless_duplicates),
        'keyless_duplicate_ids', (select coalesce(jsonb_agg(x.id order by x.created_at, x.id), '[]'::jsonb)
                                    from (select * from keyless_duplicates order by created_at, id limit 20) x)
    );
$$;

-- ---------------------------------------------------------------------------------------
-- Privileges: the trigger functions run as the owner, for no one else to call.
select public.secure_rpc('public.track_oldest_kept_version()', false);
select public.secure_rpc('public.keyless_insert_meets_keyed_copy()', false);
-- create or replace made the compaction SECURITY INVOKER again: owner's rights, as before.
select public.secure_rpc('public.compact_search_term_counts(integer)');
select public.secure_rpc('public.owed_kept_version_bytes(integer, integer)', false);
select public.secure_rpc('public.enqueue_document_version(text, text, text, text, bigint, text, uuid, integer, '
                         'boolean, timestamptz, text)');
select public.secure_rpc('public.ingestion_queue_health(integer)');
