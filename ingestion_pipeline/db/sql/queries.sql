-- Named queries used by the Python layer. Each query starts with a `-- name:` line;
-- ingestion_pipeline/db/queries.py loads them. Parameters are server-side bound.

-- name: migration_lock
-- Session-level: two migrators never interleave, even across hosts.
select pg_advisory_lock(%(key)s);

-- name: migration_unlock
select pg_advisory_unlock(%(key)s);

-- name: ledger_exists
select to_regclass('public.ingest_schema_migrations') is not null as present;

-- name: ledger_rows
select version, name, checksum, transactional, applied_at, duration_ms
from public.ingest_schema_migrations
order by version;

-- name: ledger_record
insert into public.ingest_schema_migrations (version, name, checksum, transactional, duration_ms)
values (%(version)s, %(name)s, %(checksum)s, %(transactional)s, %(duration_ms)s);

-- name: server_version
select current_setting('server_version') as version, current_database() as database;

-- ---------------------------------------------------------------------------------
-- The state-machine RPCs. Named notation (`p_x => value`) so a call resolves to
-- exactly one signature; `*_legacy` queries are the pre-hardening forms that the
-- client falls back to when the fenced signature is missing (SQLSTATE 42883).

-- name: rpc_create_batch
select create_import_batch(p_name => %(name)s, p_metadata => %(metadata)s) as result;

-- name: rpc_enqueue
select enqueue_ingestion_job(p_document_id => %(document_id)s, p_batch_id => %(batch_id)s,
    p_kind => %(kind)s, p_max_attempts => %(max_attempts)s) as result;

-- name: rpc_claim
select * from claim_ingestion_jobs(p_worker_id => %(worker_id)s, p_claim_limit => %(limit)s,
    p_stale_after_seconds => %(stale_after_seconds)s);

-- name: rpc_heartbeat
select heartbeat_ingestion_job(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_progress => %(progress)s, p_stage => %(stage)s) as result;

-- name: rpc_begin_generation
select begin_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_worker_id => %(worker_id)s) as result;

-- name: rpc_commit_generation
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_worker_id => %(worker_id)s,
    p_metadata => %(metadata)s) as result;

-- name: rpc_commit_generation_legacy
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_metadata => %(metadata)s) as result;

-- name: rpc_complete
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s, p_worker_id => %(worker_id)s) as result;

-- name: rpc_complete_legacy
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s) as result;

-- name: rpc_fail_or_retry
select fail_or_retry_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_retry => %(retry)s, p_document_status => %(document_status)s,
    p_stage => %(stage)s, p_error_message => %(error_message)s, p_next_run_at => %(next_run_at)s,
    p_worker_id => %(worker_id)s) as result;

-- name: rpc_fail_or_retry_legacy
select fail_or_retry_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_retry => %(retry)s, p_document_status => %(document_status)s,
    p_stage => %(stage)s, p_error_message => %(error_message)s, p_next_run_at => %(next_run_at)s) as result;

-- name: rpc_refresh_batch
select refresh_import_batch_status(p_batch_id => %(batch_id)s) as result;

-- name: rpc_retry
select retry_ingestion_job(p_job_id => %(job_id)s) as result;

-- name: rpc_expire_stale
select expire_stale_ingestion_jobs(p_stale_after_seconds => %(stale_after_seconds)s) as result;

-- name: rpc_cleanup
select cleanup_abandoned_document_index_generations(p_document_id => %(document_id)s,
    p_limit => %(limit)s, p_dry_run => %(dry_run)s) as result;

-- name: rpc_queue_health
select ingestion_queue_health(p_stale_after_seconds => %(stale_after_seconds)s) as result;
