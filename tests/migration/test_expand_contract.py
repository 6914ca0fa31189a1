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
