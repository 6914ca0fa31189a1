-- Registered sources and the lease of their syncs (db/rpc/sources.py; the RPCs are in
-- migrations/…_sync_sources.sql). Named notation; parameters are server-side bound.

-- name: rpc_register_source
select register_sync_source(p_name => %(name)s, p_url => %(url)s, p_collection => %(collection)s,
    p_every_minutes => %(every_minutes)s, p_delete_vanished => %(delete_vanished)s) as result;

-- name: rpc_register_source_choosing_files
-- With the globs that choose its files (…_source_selection.sql).
select register_sync_source(p_name => %(name)s, p_url => %(url)s, p_collection => %(collection)s,
    p_every_minutes => %(every_minutes)s, p_delete_vanished => %(delete_vanished)s,
    p_include => %(include)s::text[], p_exclude => %(exclude)s::text[]) as result;

-- name: rpc_remove_source
select remove_sync_source(p_name => %(name)s) as result;

-- name: rpc_begin_source_sync
select begin_source_sync(p_name => %(name)s, p_holder => %(holder)s, p_lease_seconds => %(lease_seconds)s) as result;

-- name: rpc_renew_source_sync
select renew_source_sync(p_name => %(name)s, p_token => %(token)s, p_lease_seconds => %(lease_seconds)s) as result;

-- name: rpc_finish_source_sync
select finish_source_sync(p_name => %(name)s, p_token => %(token)s, p_succeeded => %(succeeded)s,
    p_counts => %(counts)s, p_error => %(error)s) as result;

-- name: sync_sources
-- Every registered source (not queue state: read directly), by name; `due` when it has an
-- interval, is not being synced, and its interval has passed since its last sync began.
select name, url, collection, every_minutes, delete_vanished, include_globs, exclude_globs, created_at, sync_holder,
       coalesce(sync_expires_at > now(), false) as syncing, sync_expires_at, last_started_at, last_finished_at,
       last_status, last_counts, last_error,
       every_minutes is not null and coalesce(sync_expires_at <= now(), true)
           and (last_started_at is null or last_started_at + make_interval(mins => every_minutes) <= now()) as due
  from sync_sources
 order by name;
