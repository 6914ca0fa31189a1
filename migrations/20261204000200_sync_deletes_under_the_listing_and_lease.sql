-- Syncs that delete only what their listing saw, under their lease; the reads of a source's
-- keys and of a collection's batches that cost what they find (issue 44, defects 3 and 7).
--
-- delete_vanished_document(document, version, source, sync token): the delete of a document a
-- sync's listing no longer holds. It carries the version the sync read as the document's
-- latest, and is refused (`version_changed`) when, under the document's lock, the document
-- has another version: a file enqueued again after the listing (by anyone) is never deleted
-- by a sync that did not see it. A registered source's sync also passes its source and lease
-- token: the source row is locked and the lease renewed first, in the same transaction, so a
-- sync whose lease was taken or whose source was removed deletes nothing more (`lease_lost`),
-- and `remove_sync_source` waits for a delete in flight (the row lock) and is then seen by
-- the sync's next one. Lock order: the source row, then THE LOCK ORDER of delete_document
-- (job, generations, document, batch), which is called for the delete itself under the locks
-- this function took (a delete has one body).
--
-- documents_collection_key_c: (collection, source_key) in byte order ("C"), so the keys of a
-- source (a prefix) are one index range whatever the database's collation (under a linguistic
-- collation, keys sharing a prefix are not contiguous: '/' weighs nothing at the first level).
-- The live-keys read of a sync (db/sql/documents.sql), list_collections' counts and the batch
-- report of one collection walk it. Built by the next file, concurrently (writes to documents
-- go on during the build).
--
-- Expand/contract: a new function, a new index and the same signature of the batch report;
-- the previous release's client deletes with delete_document and reads as before.

create function public.delete_vanished_document(p_document_id uuid, p_version integer, p_source text default null,
                                                p_sync_token bigint default null,
                                                p_lease_seconds integer default 600)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_job uuid;
    v_open_now uuid;
    v_document public.documents%rowtype;
    v_settled boolean := false;
begin
    if p_document_id is null or p_version is null or (p_source is not null and p_sync_token is null)
       or coalesce(p_lease_seconds, 0) < 1 then
        raise exception 'delete_vanished_document: p_document_id, p_version, p_lease_seconds (>= 1), and '
                        'p_sync_token with p_source, are required' using errcode = '22023';
    end if;
    if p_source is not null then
        -- The source row first: a remove (or another sync's begin) waits for this delete, and
        -- this delete sees one that committed.
        update public.sync_sources
           set sync_expires_at = now() + make_interval(secs => p_lease_seconds)
         where name = p_source and sync_token = p_sync_token and sync_holder is not null;
        if not found then
            return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'name', p_source,
                                      'document_id', p_document_id);
        end if;
    end if;
    -- THE LOCK ORDER, as delete_document takes it (an open job that changed while we waited
    -- is undone with the subtransaction and looked up again).
    for attempt in 1..5 loop
        begin
            select id into v_job from public.ingestion_jobs
             where document_id = p_document_id and status in ('pending', 'processing')
               for no key update;
            perform 1 from public.index_generations
             where document_id = p_document_id and status in ('building', 'committed')
             order by id
               for no key update;
            select * into v_document from public.documents where id = p_document_id for no key update;
            select id into v_open_now from public.ingestion_jobs
             where document_id = p_document_id and status in ('pending', 'processing');
            if v_open_now is distinct from v_job then
                raise exception 'open job changed' using errcode = 'IF003';
            end if;
            v_settled := true;
            exit;
        exception when sqlstate 'IF003' then
            v_job := null;
        end;
    end loop;
    if not v_settled then
        return jsonb_build_object('ok', false, 'reason', 'contended', 'document_id', p_document_id);
    end if;
    if v_document.deleted_at is null and v_document.version is distinct from p_version then
        return jsonb_build_object('ok', false, 'reason', 'version_changed', 'document_id', p_document_id,
                                  'version', p_version, 'latest_version', v_document.version);
    end if;
    return public.delete_document(p_document_id);
end;
$$;

-- `ingest status --collection`: the same report; its batches found from the collection's
-- documents (documents_collection_key_c) instead of from every batch.
create or replace function public.ingestion_batch_report(p_batch_id uuid default null, p_limit integer default 20,
                                                         p_collection text default null)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    -- The batches of a collection come from its documents (documents_collection_key_c) and
    -- their jobs (ingestion_jobs_document_id): the report costs what the collection holds, not
    -- a walk over every batch and its jobs. A branch per case: its one-time filter runs only
    -- the branch asked for.
    with chosen as (
        select u.*
          from (select b.*
                  from public.import_batches b
                 where p_collection is null and (p_batch_id is null or b.id = p_batch_id)
                union all
                select b.*
                  from public.import_batches b
                 where p_collection is not null and (p_batch_id is null or b.id = p_batch_id)
                   and b.id in (select j.batch_id
                                  from public.documents d
                                  join public.ingestion_jobs j on j.document_id = d.id
                                 where d.collection = p_collection)) u
         order by u.created_at desc, u.id
         limit greatest(p_limit, 1)
    ), job_counts as (
        select j.batch_id,
               count(*) as jobs,
               count(*) filter (where j.status = 'pending') as pending,
               count(*) filter (where j.status = 'processing') as processing,
               count(*) filter (where j.status = 'completed') as completed,
               count(*) filter (where j.status = 'failed') as failed,
               count(*) filter (where j.status = 'cancelled') as cancelled,
               extract(epoch from now() - min(j.created_at) filter (where j.status = 'pending'))::bigint
                   as oldest_pending_age_seconds
          from public.ingestion_jobs j
          join chosen c on c.id = j.batch_id
         where p_collection is null
            or exists (select 1 from public.documents d where d.id = j.document_id and d.collection = p_collection)
         group by j.batch_id
    )
    select jsonb_build_object(
        'ok', true,
        'collection', p_collection,
        'batches', coalesce((
            select jsonb_agg(jsonb_build_object(
                       'batch_id', c.id, 'name', c.name, 'status', c.status,
                       'total_files', c.total_files, 'completed_files', c.completed_files,
                       'failed_files', c.failed_files, 'cancelled_files', c.cancelled_files,
                       'created_at', c.created_at, 'completed_at', c.completed_at, 'cancelled_at', c.cancelled_at,
                       'jobs', coalesce(k.jobs, 0),
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
                               'source_key', d.source_key, 'version', j.document_version,
                               'indexed_version', case when d.deleted_at is null and d.index_generation_id is not null
                                                       then d.indexed_version end, 'latest_version', d.version,
                               'attempt_count', j.attempt_count,
                               'max_attempts', j.max_attempts, 'stage', j.stage,
                               'error_message', j.error_message, 'failed_at', j.completed_at) as f
                      from public.ingestion_jobs j
                      join chosen c on c.id = j.batch_id
                      join public.documents d on d.id = j.document_id
                     where j.status = 'failed' and (p_collection is null or d.collection = p_collection)
                     order by j.completed_at desc nulls last
                     limit 50) failures), '[]'::jsonb)
    );
$$;

select public.secure_rpc('public.delete_vanished_document(uuid, integer, text, bigint, integer)');
