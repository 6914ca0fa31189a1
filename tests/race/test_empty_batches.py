"""A batch with no job at all (every file a duplicate) (migration …_lease_tokens.sql).

Before: no job will ever refresh it, a refresh leaves it `pending`, and the sensor, the
janitor and `ingest health` never consider it, however old. At head a refresh completes
it, and one left `pending` with no job for ten minutes is stuck: listed, counted, healed.
"""

from uuid import UUID

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.settings import load_settings
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import batch, index_document, seed_document
from tests.old_enqueue import enqueue_files


def created_ago(conn, batch_id: UUID, interval: str) -> None:
    conn.execute(
        "update import_batches set created_at = now() - %s::interval, updated_at = now() - %s::interval where id = %s",
        (interval, interval, batch_id),
    )


def test_a_batch_of_duplicates_completes(token_schema, new_conn, tmp_path):
    """`ingest enqueue` of a folder whose only file is already indexed: the batch gets no
    job. Before: refreshing it says `pending` (forever). After: `completed`."""
    conn = new_conn(token_schema.url)
    rpc = AnySchemaRpc(conn)
    content = b"the same bytes, uploaded twice"
    assert rpc.enqueue(seed_document(conn, content=content)).ok
    indexed, _ = index_document(rpc, conn)
    (tmp_path / "again.txt").write_bytes(content)
    settings = load_settings(database_url=token_schema.url)
    with make_pool(token_schema.url, settings) as pool:
        report = enqueue_files(pool, [tmp_path], max_bytes=1 << 20)
    assert [(f.outcome, f.document_id) for f in report.files] == [("unchanged", indexed)]
    batch_id = report.batch_id
    if batch_id is None:
        # Today's enqueue writes no batch when no file gets a job (issue 48); a batch can still
        # be left with none (the race enqueue_paths describes, or one made through the RPC).
        assert token_schema.hardened
        batch_id = rpc.create_batch("every file a duplicate").batch_id

    # Refreshed here whatever the enqueue itself does at the end.
    refreshed = rpc.refresh_batch(batch_id)
    stored = batch(conn, batch_id)

    if not token_schema.hardened:
        assert (refreshed.status, stored["status"], stored["completed_at"]) == ("pending", "pending", None)
        return

    assert (refreshed.status, stored["status"], refreshed.total) == ("completed", "completed", 0)
    assert stored["completed_at"] is not None


def test_an_old_empty_pending_batch_is_stuck_and_healed(token_schema, new_conn):
    """An empty batch created an hour ago (an enqueue that stopped before its first file,
    or one created through the RPC and never filled) and one created just now. Before:
    neither is ever listed, counted or healed. After: the old one is listed by the sensor,
    counted by health and completed by the janitor; the fresh one is left alone (grace)."""
    conn = new_conn(token_schema.url)
    rpc = AnySchemaRpc(conn)
    old = rpc.create_batch("abandoned an hour ago").batch_id
    created_ago(conn, old, "1 hour")
    fresh = rpc.create_batch("being filled right now").batch_id

    listed = rpc.sensor_state().stuck_batch_ids
    counted = rpc.queue_health().stuck_batches
    healed = rpc.refresh_stuck_batches()

    if not token_schema.hardened:
        assert (listed, counted, healed.refreshed) == ([], 0, 0)
        assert batch(conn, old)["status"] == batch(conn, fresh)["status"] == "pending"
        return

    assert (listed, counted) == ([old], 1)
    assert (healed.refreshed, [b.batch_id for b in healed.batches]) == (1, [old])
    assert batch(conn, old)["status"] == "completed"
    assert batch(conn, fresh)["status"] == "pending"
    assert (rpc.sensor_state().stuck_batch_ids, rpc.queue_health().stuck_batches) == ([], 0)


def test_the_grace_period_is_ten_minutes(token_schema, new_conn):
    """Just under ten minutes an empty pending batch is not stuck, just over it is
    (before: never)."""
    conn = new_conn(token_schema.url)
    rpc = AnySchemaRpc(conn)
    young, aged = rpc.create_batch("young").batch_id, rpc.create_batch("aged").batch_id
    created_ago(conn, young, "9 minutes 50 seconds")
    created_ago(conn, aged, "10 minutes 10 seconds")

    listed = rpc.sensor_state().stuck_batch_ids
    if not token_schema.hardened:
        assert listed == []
        return
    assert listed == [aged]
