"""The document lifecycle at head (migration …_document_lifecycle.sql, docs/state-machine.md, "Lifecycle"):
delete a document, cancel an import batch, retry failed jobs, with nothing in flight.
The races against workers in flight are in tests/race/test_lifecycle_races.py.

After each scenario the checks `ingest health` runs pass: the batches' counters equal
their jobs, documents' counts equal their rows, no batch is stuck.
"""

from __future__ import annotations

from uuid import UUID, uuid4

from ingestion_pipeline.db.rpc import IngestionRpc
from tests.helpers import (
    batch,
    document,
    document_rows,
    failing_index_checks,
    index_document,
    job,
    searchable,
    seed_batch,
    seed_document,
    seed_job,
)

WORD = "quokka"
NOTHING_LEFT = {
    "document_pages": 0,
    "document_sections": 0,
    "document_chunks": 0,
    "index_generations": 0,
    "document_sources": 0,
}


def counters(conn, batch_id) -> dict:
    row = batch(conn, batch_id)
    return {
        key: row[key]
        for key in ("status", "total_files", "open_files", "completed_files", "failed_files", "cancelled_files")
    }


def expect(status: str, total: int, open: int = 0, completed: int = 0, failed: int = 0, cancelled: int = 0) -> dict:
    return {
        "status": status,
        "total_files": total,
        "open_files": open,
        "completed_files": completed,
        "failed_files": failed,
        "cancelled_files": cancelled,
    }


def index_next(rpc: IngestionRpc, conn) -> tuple[UUID, UUID]:
    """Claim the next pending job and index it to the end (its rows all contain WORD)."""
    return index_document(rpc, conn, word=WORD)


def fail_next(rpc: IngestionRpc) -> UUID:
    """Claim the next pending job and fail it for good; returns its id."""
    [claimed] = rpc.claim("W")
    outcome = rpc.fail_or_retry(
        claimed.job_id,
        claimed.document_id,
        worker_id="W",
        lease_token=claimed.lease_token,
        retry=False,
        error_message="parser crashed",
    )
    assert outcome.ok and outcome.retried is not True, outcome
    return claimed.job_id


def ids(values) -> list[str]:
    return sorted(str(value) for value in values)


def refusals(answer) -> dict[str, str]:
    return {str(item.job_id): item.reason for item in answer.refused}


def assert_healthy(db_url: str, conn) -> None:
    assert failing_index_checks(db_url, conn) == []


# -- delete ------------------------------------------------------------------------------


def test_delete_of_an_indexed_document_with_nothing_in_flight_purges_at_once(db_url, conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id)
    index_next(rpc, conn)
    assert searchable(conn, document_id, WORD)
    source_name = document(conn, document_id)["source_name"]
    assert [d.id for d in rpc.live_documents_by_source([source_name])] == [document_id]
    before = counters(conn, batch_id)
    assert before == expect("completed", 1, completed=1)

    deleted = rpc.delete_document(document_id)

    assert deleted.ok, deleted
    assert (deleted.document_id, deleted.source_name) == (document_id, source_name)
    assert (deleted.cancelled_job_id, deleted.in_flight, deleted.purged) == (None, False, True), deleted
    assert document_rows(conn, document_id) == NOTHING_LEFT
    row = document(conn, document_id)
    assert (row["status"], row["index_generation_id"]) == ("deleted", None) and row["deleted_at"] is not None
    assert not searchable(conn, document_id, WORD)
    assert rpc.live_documents_by_source([source_name]) == []
    assert job(conn, job_id)["status"] == "completed"  # its completed job stays counted as completed
    assert counters(conn, batch_id) == before
    assert_healthy(db_url, conn)

    again = rpc.delete_document(document_id)
    assert (again.ok, again.reason, again.document_id) == (False, "already_deleted", document_id), again
    assert again.deleted_at == row["deleted_at"]
    missing = rpc.delete_document(uuid4())
    assert (missing.ok, missing.reason) == (False, "not_found"), missing
    assert counters(conn, batch_id) == before
    assert_healthy(db_url, conn)


def test_a_deleted_documents_content_can_be_imported_again(db_url, conn):
    rpc = IngestionRpc(conn)
    content = b"the same bytes twice about " + WORD.encode()
    first = seed_document(conn, content=content, name="same.txt")
    assert rpc.enqueue(first).ok
    index_next(rpc, conn)
    assert rpc.delete_document(first).purged

    second = seed_document(conn, content=content, name="same.txt")
    assert rpc.enqueue(second).ok
    index_next(rpc, conn)
    assert [d.id for d in rpc.live_documents_by_source(["same.txt"])] == [second]
    assert searchable(conn, second, WORD) and not searchable(conn, first, WORD)
    assert_healthy(db_url, conn)


def test_delete_of_a_document_with_a_pending_job_cancels_it(db_url, conn):
    """Open -1, cancelled +1; the batch's status follows the rule (no cancel of the batch:
    it ends by its other jobs, here completed_with_errors once the last one failed)."""
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    failing_document, _ = seed_job(conn, batch_id)
    failed_job = fail_next(rpc)
    document_id, job_id = seed_job(conn, batch_id)
    other_document, other_job = seed_job(conn, batch_id)
    assert counters(conn, batch_id) == expect("processing", 3, open=2, failed=1)

    deleted = rpc.delete_document(document_id)

    assert deleted.ok, deleted
    assert (deleted.cancelled_job_id, deleted.in_flight, deleted.purged) == (job_id, False, True), deleted
    row = job(conn, job_id)
    assert (row["status"], row["stage"], row["error_message"]) == ("cancelled", "cancelled", "document deleted")
    assert row["completed_at"] is not None
    assert document(conn, document_id)["status"] == "deleted"
    assert document_rows(conn, document_id) == NOTHING_LEFT
    assert counters(conn, batch_id) == expect("processing", 3, open=1, failed=1, cancelled=1)
    assert deleted.batch.model_dump(include={"status", "total", "open", "failed", "cancelled"}) == {
        "status": "processing",
        "total": 3,
        "open": 1,
        "failed": 1,
        "cancelled": 1,
    }
    assert rpc.claim("W")[0].job_id == other_job  # the cancelled job is never claimed
    assert_healthy(db_url, conn)

    assert rpc.delete_document(other_document).in_flight  # the last open job, in flight
    assert counters(conn, batch_id) == expect("completed_with_errors", 3, failed=1, cancelled=2)
    assert job(conn, failed_job)["status"] == "failed" and document(conn, failing_document)["status"] == "failed"
    assert rpc.cleanup_generations(dry_run=False).ok
    assert document_rows(conn, other_document) == NOTHING_LEFT
    assert_healthy(db_url, conn)


def test_delete_of_the_only_pending_job_of_a_batch_ends_it_completed(db_url, conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    document_id, _ = seed_job(conn, batch_id)
    assert rpc.delete_document(document_id).ok
    # open 0, never cancelled as a batch, nothing failed: completed (the batch status rule)
    assert counters(conn, batch_id) == expect("completed", 1, cancelled=1)
    assert batch(conn, batch_id)["completed_at"] is not None
    assert_healthy(db_url, conn)


def test_the_lifecycle_calls_run_as_the_pipelines_role(conn):
    """`ingest delete/cancel/retry` and the Dagster lifecycle jobs connect as the pipeline
    does (ingestion_worker in a least-privilege setup), like retry and the cleanup."""
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id)
    with conn.transaction():
        conn.execute("set local role ingestion_worker")
        assert conn.execute("select delete_document(%s) as r", (document_id,)).fetchone()["r"]["ok"]
    assert job(conn, job_id)["status"] == "cancelled" and document(conn, document_id)["deleted_at"] is not None


# -- cancel ------------------------------------------------------------------------------


def test_cancel_of_a_batch_with_indexed_and_pending_documents(db_url, conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    indexed_document, _ = seed_job(conn, batch_id)
    index_next(rpc, conn)
    reindex = rpc.enqueue(indexed_document, batch_id=batch_id, kind="reindex")  # an indexed document's rebuild
    assert reindex.ok
    pending = [seed_job(conn, batch_id) for _ in range(2)]
    assert counters(conn, batch_id) == expect("processing", 4, open=3, completed=1)

    cancelled = rpc.cancel_batch(batch_id)

    assert cancelled.ok, cancelled
    assert (cancelled.batch_id, cancelled.cancelled, cancelled.in_flight) == (batch_id, 3, 0), cancelled
    assert ids(cancelled.job_ids) == ids([reindex.job_id, *(j for _, j in pending)])
    assert cancelled.batch.model_dump(
        include={"batch_id", "status", "total", "completed", "failed", "cancelled", "open"}
    ) == {
        "batch_id": batch_id,
        "status": "cancelled",
        "total": 4,
        "completed": 1,
        "failed": 0,
        "cancelled": 3,
        "open": 0,
    }
    assert counters(conn, batch_id) == expect("cancelled", 4, completed=1, cancelled=3)
    assert batch(conn, batch_id)["cancelled_at"] is not None
    for job_id in cancelled.job_ids:
        row = job(conn, job_id)
        assert (row["status"], row["stage"], row["error_message"]) == (
            "cancelled",
            "cancelled",
            "import batch cancelled",
        )
    # The indexed document stays indexed (its reindex was cancelled) and searchable.
    assert document(conn, indexed_document)["status"] == "indexed"
    assert searchable(conn, indexed_document, WORD)
    assert {document(conn, d)["status"] for d, _ in pending} == {"cancelled"}
    assert rpc.claim("W") == []
    report = rpc.batch_report(batch_id=batch_id).batches[0]
    assert (report.cancelled_files, report.cancelled, report.status) == (3, 3, "cancelled")
    assert_healthy(db_url, conn)

    again = rpc.cancel_batch(batch_id)
    assert (again.ok, again.nothing_open, again.cancelled, again.status) == (True, True, 0, "cancelled"), again
    assert counters(conn, batch_id) == expect("cancelled", 4, completed=1, cancelled=3)
    missing = rpc.cancel_batch(uuid4())
    assert (missing.ok, missing.reason) == (False, "batch_not_found"), missing
    assert_healthy(db_url, conn)


def test_cancel_of_a_finished_batch_marks_it_cancelled_and_nothing_else(db_url, conn):
    """Nothing open: no job or document changes, but the batch is marked cancelled, so the
    rest of a folder still being enqueued into it is refused (…_one_lock_order.sql)."""
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id)
    index_next(rpc, conn)
    answer = rpc.cancel_batch(batch_id)
    assert (answer.ok, answer.nothing_open, answer.cancelled, answer.status) == (True, True, 0, "cancelled"), answer
    assert counters(conn, batch_id) == expect("cancelled", 1, completed=1)
    assert batch(conn, batch_id)["cancelled_at"] is not None
    assert (job(conn, job_id)["status"], document(conn, document_id)["status"]) == ("completed", "indexed")
    assert_healthy(db_url, conn)


# -- retry -------------------------------------------------------------------------------


def test_retry_one_failed_job(db_url, conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    document_id, _ = seed_job(conn, batch_id)
    job_id = fail_next(rpc)
    assert counters(conn, batch_id) == expect("completed_with_errors", 1, failed=1)

    answer = rpc.retry_failed(job_ids=[job_id])

    assert (answer.ok, answer.retried, ids(answer.job_ids), answer.refused) == (True, 1, ids([job_id]), []), answer
    assert job(conn, job_id)["status"] == "pending"
    assert counters(conn, batch_id) == expect("processing", 1, open=1)
    assert_healthy(db_url, conn)
    index_next(rpc, conn)
    assert document(conn, document_id)["status"] == "indexed"
    assert counters(conn, batch_id) == expect("completed", 1, completed=1)
    assert_healthy(db_url, conn)


def test_retry_a_batchs_failed_jobs_and_then_every_failed_job(db_url, conn):
    rpc = IngestionRpc(conn)
    first_batch, second_batch = seed_batch(conn, "first"), seed_batch(conn, "second")
    seed_job(conn, first_batch)
    first_failed = [fail_next(rpc)]
    seed_job(conn, first_batch)
    first_failed.append(fail_next(rpc))
    seed_job(conn, first_batch)
    index_next(rpc, conn)
    seed_job(conn, second_batch)
    second_failed = fail_next(rpc)
    seed_job(conn)
    unbatched_failed = fail_next(rpc)
    deleted_document, _ = seed_job(conn, second_batch)
    failed_then_deleted = fail_next(rpc)
    assert rpc.delete_document(deleted_document).ok  # its failed job is never selected again

    by_batch = rpc.retry_failed(batch_id=first_batch)
    assert (by_batch.ok, by_batch.retried, by_batch.refused) == (True, 2, []), by_batch
    assert ids(by_batch.job_ids) == ids(first_failed)
    assert counters(conn, first_batch) == expect("processing", 3, open=2, completed=1)
    assert counters(conn, second_batch) == expect("completed_with_errors", 2, failed=2)
    assert_healthy(db_url, conn)

    everything = rpc.retry_failed()
    assert (everything.ok, everything.retried) == (True, 2), everything
    assert ids(everything.job_ids) == ids([second_failed, unbatched_failed])
    assert job(conn, failed_then_deleted)["status"] == "failed"
    assert counters(conn, second_batch) == expect("processing", 2, open=1, failed=1)
    assert rpc.retry_failed().retried == 0
    assert_healthy(db_url, conn)


def test_retry_refusals(db_url, conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    _, completed_job = seed_job(conn, batch_id)
    index_next(rpc, conn)
    deleted_document, _ = seed_job(conn)
    deleted_job = fail_next(rpc)
    assert rpc.delete_document(deleted_document).ok
    _, live_job = seed_job(conn, batch_id)
    [claimed] = rpc.claim("W")
    assert claimed.job_id == live_job
    _, queued_job = seed_job(conn, batch_id)
    cancelled_batch = seed_batch(conn, "to cancel")
    _, cancelled_job = seed_job(conn, cancelled_batch)
    assert rpc.cancel_batch(cancelled_batch).ok
    unknown = uuid4()
    before = {b: counters(conn, b) for b in (batch_id, cancelled_batch)}

    expected = {
        completed_job: "completed",
        live_job: "lease_live",
        queued_job: "already_queued",
        cancelled_job: "cancelled",
        deleted_job: "document_deleted",
        unknown: "not_found",
    }
    for job_id, reason in expected.items():
        one = rpc.retry(job_id)
        assert (one.ok, one.reason) == (False, reason), (job_id, one)
    many = rpc.retry_failed(job_ids=list(expected))
    assert (many.ok, many.retried, many.job_ids) == (True, 0, []), many
    assert refusals(many) == {str(job_id): reason for job_id, reason in expected.items()}
    assert {b: counters(conn, b) for b in before} == before
    assert job(conn, cancelled_job)["status"] == "cancelled" and job(conn, deleted_job)["status"] == "failed"
    assert_healthy(db_url, conn)
