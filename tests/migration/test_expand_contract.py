"""Expand/contract guard: RPC calls that earlier releases make must keep resolving at
head. Removing one needs a contract step: a migration that drops it, listed below with
the release note that announced it."""

import pytest

from ingestion_pipeline.db.connection import connect

# Calls as released workers make them (positional, old arity).
CALLED_BY_EARLIER_RELEASES = [
    "complete_ingestion_job(null::uuid, null::uuid, null::uuid, null::text)",
    "fail_or_retry_ingestion_job(null::uuid, null::uuid, null::uuid, null::boolean, null::text, null::text, "
    "null::text, null::timestamptz)",
    "claim_ingestion_jobs(null::text, null::integer, null::integer)",
    "refresh_import_batch_status(null::uuid)",
    "enqueue_ingestion_job(null::uuid, null::uuid, null::text, null::integer)",
    "begin_document_index_generation(null::uuid, null::uuid, null::text)",
    "cleanup_abandoned_document_index_generations(null::uuid, null::integer, null::boolean)",
    "create_import_batch(null::text, null::jsonb)",
    # The worker-id-fenced calls of the release before lease tokens (named notation).
    "heartbeat_ingestion_job(p_job_id => null::uuid, p_worker_id => null::text, p_progress => null::integer, "
    "p_stage => null::text)",
    "commit_document_index_generation(p_job_id => null::uuid, p_document_id => null::uuid, "
    "p_generation_id => null::uuid, p_worker_id => null::text, p_metadata => null::jsonb)",
    "complete_ingestion_job(p_job_id => null::uuid, p_document_id => null::uuid, p_batch_id => null::uuid, "
    "p_stage => null::text, p_worker_id => null::text)",
    "fail_or_retry_ingestion_job(p_job_id => null::uuid, p_document_id => null::uuid, p_batch_id => null::uuid, "
    "p_retry => null::boolean, p_document_status => null::text, p_stage => null::text, "
    "p_error_message => null::text, p_next_run_at => null::timestamptz, p_worker_id => null::text)",
    "record_ingestion_job_stage(p_job_id => null::uuid, p_worker_id => null::text, p_stage => null::text, "
    "p_started_at => null::timestamptz, p_finished_at => null::timestamptz, p_detail => null::jsonb)",
    # The lease-token release (before the server computed the retry delay).
    "fail_or_retry_ingestion_job(p_job_id => null::uuid, p_document_id => null::uuid, p_batch_id => null::uuid, "
    "p_retry => null::boolean, p_document_status => null::text, p_stage => null::text, "
    "p_error_message => null::text, p_next_run_at => null::timestamptz, p_worker_id => null::text, "
    "p_lease_token => null::bigint)",
    # The release before the embedder record (…_generations_record_their_embedder.sql).
    "commit_document_index_generation(p_job_id => null::uuid, p_document_id => null::uuid, "
    "p_generation_id => null::uuid, p_worker_id => null::text, p_metadata => null::jsonb, "
    "p_lease_token => null::bigint)",
    "commit_and_complete_ingestion_job(p_job_id => null::uuid, p_document_id => null::uuid, "
    "p_generation_id => null::uuid, p_lease_token => null::bigint, p_metadata => null::jsonb, "
    "p_batch_id => null::uuid, p_stage => null::text)",
    "expire_stale_ingestion_jobs(null::integer)",
    "ingestion_sensor_state(p_stale_after_seconds => null::integer, p_limit => null::integer)",
    "ingestion_queue_health(p_stale_after_seconds => null::integer)",
]

# call -> "<migration that removes it>: <where the removal was announced>"
CONTRACTED: dict[str, str] = {}


@pytest.mark.parametrize("call", CALLED_BY_EARLIER_RELEASES)
def test_released_calls_still_resolve(db_url, call):
    if call in CONTRACTED:
        pytest.skip(f"contracted: {CONTRACTED[call]}")
    with connect(db_url) as conn:
        # EXPLAIN resolves the function (name, arity, types) without running it.
        conn.execute(f"explain select {call}")
