-- What the Dagster sensors and the janitor need, as cheap RPCs.

-- Batches that still say pending/processing although none of their jobs is open (the
-- R9 leftovers the sensor and the janitor heal). One definition, used below and by health.
create function stuck_import_batch_ids(p_limit integer default 100)
returns setof uuid
language sql
stable
set search_path = pg_catalog, public, pg_temp
as $$
    select b.id
      from import_batches b
     where b.status in ('pending', 'processing')
       and exists (select 1 from ingestion_jobs j where j.batch_id = b.id)
       and not exists (select 1 from ingestion_jobs j
                        where j.batch_id = b.id and j.status in ('pending', 'processing'))
     order by b.id
     limit greatest(p_limit, 1);
$$;

-- One cheap look at the queue for the sensors: how much is claimable now, and which
-- batches still say pending/processing although none of their jobs is open.
create function ingestion_sensor_state(p_stale_after_seconds integer default 300, p_limit integer default 100)
returns jsonb
language sql
stable
security definer
set search_path = pg_catalog, public, pg_temp
as $$
    select jsonb_build_object(
        'ok', true,
        'claimable', (select count(*) from ingestion_jobs
                       where attempt_count < max_attempts
                         and ((status = 'pending' and next_run_at <= now())
                           or (status = 'processing'
                               and locked_at < now() - make_interval(secs => p_stale_after_seconds)))),
        'pending_later', (select count(*) from ingestion_jobs where status = 'pending' and next_run_at > now()),
        'processing', (select count(*) from ingestion_jobs where status = 'processing'),
        'stuck_batch_ids', coalesce((select jsonb_agg(id order by id)
                                       from stuck_import_batch_ids(p_limit) as id), '[]'::jsonb)
    );
$$;

-- The safety net for R9-style leftovers: recompute every batch whose status disagrees
-- with its (all terminal) jobs. Idempotent; batches are refreshed in id order.
create function refresh_stuck_import_batches(p_limit integer default 100)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, public, pg_temp
as $$
declare
    v_ids uuid[];
begin
    select coalesce(array_agg(id order by id), '{}') into v_ids from stuck_import_batch_ids(p_limit) as id;
    return jsonb_build_object('ok', true, 'refreshed', coalesce(array_length(v_ids, 1), 0),
        'batches', refresh_import_batches(v_ids));
end;
$$;

select secure_rpc('stuck_import_batch_ids(integer)', false);
select secure_rpc('ingestion_sensor_state(integer, integer)');
select secure_rpc('refresh_stuck_import_batches(integer)');
