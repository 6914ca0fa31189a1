-- Older versions' bytes, kept when configured, and the batch report of one collection
-- (issue 31; docs/state-machine.md, "Versions").
--
-- A build reads only its document's latest bytes (document_sources, one row per document,
-- replaced by the enqueue of a new version). With INGEST_KEEP_VERSIONS = N > 1 that enqueue
-- first moves the bytes it replaces here, in the same statement (queries.sql,
-- store_document_source), so the newest N versions' bytes stay at hand (`ingest show KEY
-- --version V --bytes`). The janitor removes what is beyond its own N and every kept byte
-- of a deleted document, in bounded passes (cleanup_kept_version_bytes). Versions' metadata
-- (document_versions) is kept whatever N is; superseded versions' index rows go with the
-- guarded generation cleanup as before.
--
-- Expand/contract: a new table and a new RPC; ingestion_batch_report gains a last
-- parameter with a default, so the previous release's calls (named or positional) resolve.

create table public.document_version_sources (
    document_id uuid not null,
    version integer not null,
    content bytea not null,
    kept_at timestamptz not null default now(),
    primary key (document_id, version),
    foreign key (document_id, version) references public.document_versions (document_id, version) on delete cascade
);
revoke all on table public.document_version_sources from public;
grant select on table public.document_version_sources to ingestion_worker;

-- Supabase's default privileges hand anon/authenticated every new table, sequence and
-- function in public: this takes them back where those roles exist (…_harden_state_rpcs.sql
-- did it inline; migrations from here on call this). Run by the migrations as the owner of
-- what it names; granted to no one.
create function public.revoke_from_supabase_roles(p_object text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_role text;
begin
    foreach v_role in array array['anon', 'authenticated'] loop
        if exists (select 1 from pg_catalog.pg_roles where rolname = v_role) then
            execute format('revoke all on %s from %I', p_object, v_role);
        end if;
    end loop;
end;
$$;
revoke all on function public.revoke_from_supabase_roles(text) from public;
select public.revoke_from_supabase_roles('function public.revoke_from_supabase_roles(text)');
select public.revoke_from_supabase_roles('table public.document_version_sources');

-- Kept bytes that are owed: of a deleted document, or older than the newest p_keep_versions
-- versions (the latest's bytes, in document_sources, count as one); at most p_limit, in key
-- order. The cleanup and its dry run make the same choice through this.
create function public.owed_kept_version_bytes(p_keep_versions integer, p_limit integer)
returns table (document_id uuid, version integer)
language sql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select k.document_id, k.version
      from public.document_version_sources k
      join public.documents d on d.id = k.document_id
     where d.deleted_at is not null or d.version is null or k.version <= d.version - p_keep_versions
     order by k.document_id, k.version
     limit greatest(p_limit, 0);
$$;

-- Bounded: at most p_limit versions a call. No job guard is needed, unlike for generations:
-- no build reads kept bytes, and a kept version only ever becomes more owed (versions grow,
-- a deleted document stays deleted).
create function public.cleanup_kept_version_bytes(p_keep_versions integer default 1, p_limit integer default 100,
                                                  p_dry_run boolean default true)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_versions bigint;
    v_bytes bigint;
begin
    if p_keep_versions is null or p_keep_versions < 1 then
        raise exception 'cleanup_kept_version_bytes: p_keep_versions must be at least 1' using errcode = '22023';
    end if;
    if p_dry_run then
        select count(*), coalesce(sum(pg_column_size(k.content)), 0) into v_versions, v_bytes
          from public.owed_kept_version_bytes(p_keep_versions, p_limit) o
          join public.document_version_sources k using (document_id, version);
    else
        with gone as (
            delete from public.document_version_sources k
             using public.owed_kept_version_bytes(p_keep_versions, p_limit) o
             where k.document_id = o.document_id and k.version = o.version
            returning pg_column_size(k.content) as size
        )
        select count(*), coalesce(sum(size), 0) into v_versions, v_bytes from gone;
    end if;
    return jsonb_build_object('ok', true, 'dry_run', p_dry_run, 'keep_versions', p_keep_versions,
                              'versions', v_versions, 'bytes', v_bytes);
end;
$$;

-- `ingest status --collection C`: the batches holding a job of a document of C, their jobs
-- of C counted, and C's failures. Null: every batch, as before.
-- squawk-ignore ban-drop-function
drop function public.ingestion_batch_report(uuid, integer);
create function public.ingestion_batch_report(p_batch_id uuid default null, p_limit integer default 20,
                                              p_collection text default null)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    -- `p_collection is null or exists (…)`: the look-up runs only when a collection is asked.
    with chosen as (
        select b.*
          from public.import_batches b
         where (p_batch_id is null or b.id = p_batch_id)
           and (p_collection is null
                or exists (select 1 from public.ingestion_jobs j join public.documents d on d.id = j.document_id
                            where j.batch_id = b.id and d.collection = p_collection))
         order by b.created_at desc, b.id
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
                               'source_key', d.source_key, 'version', j.document_version, 'attempt_count', j.attempt_count,
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

select public.secure_rpc('public.owed_kept_version_bytes(integer, integer)', false);
select public.secure_rpc('public.cleanup_kept_version_bytes(integer, integer, boolean)');
select public.secure_rpc('public.ingestion_batch_report(uuid, integer, text)');
