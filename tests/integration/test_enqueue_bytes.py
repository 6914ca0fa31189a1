"""The Python API's upload (operations/sources.py, `enqueue_bytes`): an app names its own
key; the same key in two collections is two documents; the same bytes queue nothing; a
refused upload writes nothing."""

from __future__ import annotations

import pytest

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import BatchWasCancelled
from ingestion_pipeline.operations.sources import enqueue_bytes
from ingestion_pipeline.worker import Worker

KEY = "app://invoices/2026/0042"


def counts(conn) -> tuple[int, int, int]:
    row = conn.execute(
        "select (select count(*) from documents) as documents, (select count(*) from document_versions) as versions,"
        " (select count(*) from document_sources) as sources"
    ).fetchone()
    return row["documents"], row["versions"], row["sources"]


def test_an_app_uploads_versions_under_its_own_key(pool, settings, conn):
    first = enqueue_bytes(pool, b"Invoice 42: 10 dollars", source_key=KEY, mime_type="text/plain")
    assert (first.outcome, first.version) == ("new", 1) and first.job_id is not None
    assert Worker(pool, settings).run(drain=True).counts["completed"] == 1

    same = enqueue_bytes(pool, b"Invoice 42: 10 dollars", source_key=KEY)
    assert (same.outcome, same.document_id, same.job_id) == ("unchanged", first.document_id, None)
    changed = enqueue_bytes(pool, b"Invoice 42: 25 dollars", source_key=KEY)
    assert (changed.outcome, changed.version, changed.document_id) == ("new_version", 2, first.document_id)

    other = enqueue_bytes(pool, b"Invoice 42: 10 dollars", source_key=KEY, collection="tenant-b")
    assert other.outcome == "new" and other.document_id != first.document_id

    history = IngestionRpc(pool).document_history(document_id=first.document_id)
    assert history.document is not None and history.document.source_name == "0042"  # the key's last segment
    assert counts(conn) == (2, 3, 2)


def test_an_upload_into_a_cancelled_batch_writes_nothing(pool, conn):
    rpc = IngestionRpc(pool)
    batch_id = rpc.create_batch("closed", {}).batch_id
    assert rpc.cancel_batch(batch_id).ok
    with pytest.raises(BatchWasCancelled):
        enqueue_bytes(pool, b"late", source_key=KEY, batch_id=batch_id)
    assert counts(conn) == (0, 0, 0)
