-- Which files of a registered source its syncs take (issue 61): globs, as `ingest sync
-- --include/--exclude` take them (operations/selection.py): `include` takes the files that
-- match one instead of the source's documents (by suffix), `exclude` passes over the files
-- that match one. Empty arrays, as every source registered before has: its documents.
--
-- The columns have constant defaults (no rewrite); begin_source_sync hands the globs to the
-- sync with the rest of its lease (a previous release's client ignores the two keys, and syncs
-- every file as before); register_sync_source takes them as two more arguments with defaults,
-- replacing the five-argument function (one function per name: tests/race/test_security.py),
-- so that the previous release's call, five named arguments, resolves to it unchanged.

alter table public.sync_sources
    add column include_globs text[] not null default '{}',
    add column exclude_globs text[] not null default '{}';

-- squawk-ignore ban-drop-function
drop function public.register_sync_source(text, text, text, integer, boolean);  -- replaced below, same call

create function public.register_sync_source(p_name text, p_url text, p_collection text default 'default',
                                            p_every_minutes integer default null,
                                            p_delete_vanished boolean default true,
                                            p_include text[] default '{}', p_exclude text[] default '{}')
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    insert into public.sync_sources (name, url, collection, every_minutes, delete_vanished, include_globs,
                                     exclude_globs)
    values (p_name, p_url, coalesce(p_collection, 'default'), p_every_minutes, coalesce(p_delete_vanished, true),
            coalesce(p_include, '{}'), coalesce(p_exclude, '{}'))
    on conflict (name) do nothing;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'source_exists', 'name', p_name);
    end if;
    return jsonb_build_object('ok', true, 'name', p_name);
exception when check_violation then
    return jsonb_build_object('ok', false, 'reason', 'invalid', 'name', p_name, 'detail', sqlerrm);
end;
$$;

create or replace function public.begin_source_sync(p_name text, p_holder text, p_lease_seconds integer default 600)
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
                              'expires_at', v_source.sync_expires_at, 'include', to_jsonb(v_source.include_globs),
                              'exclude', to_jsonb(v_source.exclude_globs));
end;
$$;

select public.secure_rpc('public.register_sync_source(text, text, text, integer, boolean, text[], text[])');
