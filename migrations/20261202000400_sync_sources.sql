-- Registered sources (issue 32; docs/state-machine.md, "Sources"): folders and buckets that
-- `ingest source sync NAME` and Dagster's schedule mirror into a collection. Rows in the
-- database, so every machine and Dagster see the same set.
--
-- One sync of a source at a time: a sync holds the source's lease (sync_token, a new value of
-- sync_source_tokens at every begin; sync_expires_at, extended while it runs). A second sync is refused
-- while the lease is live (`sync_in_progress`, with its holder and deadline), and a sync
-- whose lease was taken over is refused at its next renewal, before its deletes
-- (`lease_lost`), and when it reports its outcome. What the sync enqueues and deletes goes
-- through the document RPCs, each atomic on its own.

-- Tokens come from one sequence, so a source removed and registered again under the same name
-- never hands out a token an earlier sync of that name still holds.
create sequence public.sync_source_tokens;
revoke all on sequence public.sync_source_tokens from public;

create table public.sync_sources (
    name text primary key,
    url text not null,
    collection text not null default 'default',
    every_minutes integer,
    delete_vanished boolean not null default true,
    created_at timestamptz not null default now(),
    sync_token bigint not null default 0,
    sync_holder text,
    sync_expires_at timestamptz,
    last_started_at timestamptz,
    last_finished_at timestamptz,
    last_status text,
    last_counts jsonb,
    last_error text,
    constraint sync_sources_name_check check (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    constraint sync_sources_url_check check (url <> ''),
    constraint sync_sources_collection_check check (collection <> ''),
    constraint sync_sources_every_check check (every_minutes is null or every_minutes >= 1),
    constraint sync_sources_status_check check (last_status is null or last_status in ('succeeded', 'failed'))
);
revoke all on table public.sync_sources from public;
grant select on table public.sync_sources to ingestion_worker;
select public.revoke_from_supabase_roles('table public.sync_sources');
select public.revoke_from_supabase_roles('sequence public.sync_source_tokens');

create function public.register_sync_source(p_name text, p_url text, p_collection text default 'default',
                                            p_every_minutes integer default null,
                                            p_delete_vanished boolean default true)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    insert into public.sync_sources (name, url, collection, every_minutes, delete_vanished)
    values (p_name, p_url, coalesce(p_collection, 'default'), p_every_minutes, coalesce(p_delete_vanished, true))
    on conflict (name) do nothing;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'source_exists', 'name', p_name);
    end if;
    return jsonb_build_object('ok', true, 'name', p_name);
exception when check_violation then
    return jsonb_build_object('ok', false, 'reason', 'invalid', 'name', p_name, 'detail', sqlerrm);
end;
$$;

-- A sync in progress stops at its next renewal (`lease_lost`): nothing holds its token any more.
create function public.remove_sync_source(p_name text)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_holder text;
begin
    delete from public.sync_sources where name = p_name
    returning case when sync_expires_at > now() then sync_holder end into v_holder;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found', 'name', p_name);
    end if;
    return jsonb_build_object('ok', true, 'name', p_name, 'sync_in_progress', v_holder is not null,
                              'holder', v_holder);
end;
$$;

create function public.begin_source_sync(p_name text, p_holder text, p_lease_seconds integer default 600)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_source public.sync_sources%rowtype;
begin
    if p_holder is null or btrim(p_holder) = '' or p_lease_seconds is null or p_lease_seconds < 1 then
        raise exception 'begin_source_sync: p_holder and p_lease_seconds (>= 1) are required' using errcode = '22023';
    end if;
    select * into v_source from public.sync_sources where name = p_name for no key update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'not_found', 'name', p_name);
    end if;
    if v_source.sync_expires_at > now() then
        return jsonb_build_object('ok', false, 'reason', 'sync_in_progress', 'name', p_name,
                                  'holder', v_source.sync_holder, 'expires_at', v_source.sync_expires_at);
    end if;
    update public.sync_sources
       set sync_token = nextval('public.sync_source_tokens'), sync_holder = p_holder,
           sync_expires_at = now() + make_interval(secs => p_lease_seconds), last_started_at = now()
     where name = p_name
    returning * into v_source;
    return jsonb_build_object('ok', true, 'name', p_name, 'token', v_source.sync_token, 'url', v_source.url,
                              'collection', v_source.collection, 'delete_vanished', v_source.delete_vanished,
                              'expires_at', v_source.sync_expires_at);
end;
$$;

-- Renewed only by the lease's own token, and only while no other sync took the source.
create function public.renew_source_sync(p_name text, p_token bigint, p_lease_seconds integer default 600)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_expires timestamptz;
begin
    update public.sync_sources
       set sync_expires_at = now() + make_interval(secs => p_lease_seconds)
     where name = p_name and sync_token = p_token and sync_holder is not null
    returning sync_expires_at into v_expires;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'name', p_name);
    end if;
    return jsonb_build_object('ok', true, 'name', p_name, 'expires_at', v_expires);
end;
$$;

create function public.finish_source_sync(p_name text, p_token bigint, p_succeeded boolean,
                                          p_counts jsonb default null, p_error text default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    update public.sync_sources
       set sync_holder = null, sync_expires_at = null, last_finished_at = now(),
           last_status = case when p_succeeded then 'succeeded' else 'failed' end,
           last_counts = p_counts, last_error = p_error
     where name = p_name and sync_token = p_token and sync_holder is not null;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'lease_lost', 'name', p_name);
    end if;
    return jsonb_build_object('ok', true, 'name', p_name);
end;
$$;

-- What a sync compares its listing with: the live documents of these keys in a collection, with
-- what the source held at their latest version (size, modification time, ETag: an entry that
-- matches is not read), and whether that version waits for a build nobody will do
-- (`build_cancelled`: not indexed, no job of the document open, and the version's last job
-- cancelled, as a cancel of the sync's import batch leaves it). The sync queues those again
-- (enqueue_ingestion_job, no read): otherwise a file whose batch was cancelled would never be
-- indexed while it stays as it is. A version that failed stays failed until its file changes
-- or an operator retries it (`ingest retry`): the same bytes would fail again at every sync.
create function public.known_source_versions(p_collection text, p_keys text[])
returns table (source_key text, document_id uuid, version integer, byte_size bigint,
               source_modified_at timestamptz, source_etag text, build_cancelled boolean)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select d.source_key, d.id, d.version, v.byte_size, v.source_modified_at, v.source_etag,
           d.indexed_version is distinct from d.version
           and coalesce((select j.status = 'cancelled' from public.ingestion_jobs j
                          where j.document_id = d.id and j.document_version = d.version
                          order by j.created_at desc, j.id desc
                          limit 1), false)
           and not exists (select 1 from public.ingestion_jobs o
                            where o.document_id = d.id and o.status in ('pending', 'processing'))
      from public.documents d
      join public.document_versions v on v.document_id = d.id and v.version = d.version
     where d.collection = p_collection and d.source_key = any (p_keys) and d.deleted_at is null;
$$;

select public.secure_rpc('public.register_sync_source(text, text, text, integer, boolean)');
select public.secure_rpc('public.remove_sync_source(text)');
select public.secure_rpc('public.begin_source_sync(text, text, integer)');
select public.secure_rpc('public.renew_source_sync(text, bigint, integer)');
select public.secure_rpc('public.finish_source_sync(text, bigint, boolean, jsonb, text)');
select public.secure_rpc('public.known_source_versions(text, text[])');
