-- Batches and queue views: create, enqueue, the counters' repair path, sensor, status, health
-- (db/rpc/batches.py).
-- Named notation (`p_x => value`) so a call resolves to exactly one signature; fenced RPCs
-- pass the claim's lease token. Parameters are server-side bound.

-- name: rpc_create_batch
select create_import_batch(p_name => %(name)s, p_metadata => %(metadata)s) as result;

-- name: rpc_enqueue
select enqueue_ingestion_job(p_document_id => %(document_id)s, p_batch_id => %(batch_id)s,
    p_kind => %(kind)s, p_max_attempts => %(max_attempts)s) as result;

-- name: rpc_refresh_batch
select refresh_import_batch_status(p_batch_id => %(batch_id)s) as result;

-- name: rpc_refresh_stuck_batches
select refresh_stuck_import_batches(p_limit => %(limit)s) as result;

-- name: rpc_refresh_drifted_batches
select refresh_drifted_import_batches(p_limit => %(limit)s) as result;

-- name: rpc_sensor_state
select ingestion_sensor_state(p_stale_after_seconds => %(stale_after_seconds)s, p_limit => %(limit)s) as result;

-- name: rpc_batch_report
select ingestion_batch_report(p_batch_id => %(batch_id)s, p_limit => %(limit)s) as result;

-- name: rpc_batch_report_of_collection
-- The batches holding a job of the collection's documents, those jobs counted, its failures.
select ingestion_batch_report(p_batch_id => %(batch_id)s, p_limit => %(limit)s,
    p_collection => %(collection)s) as result;

-- name: rpc_queue_health
select ingestion_queue_health(p_stale_after_seconds => %(stale_after_seconds)s) as result;

-- name: rpc_index_totals
select ingestion_index_totals() as result;
