"""A cancelled import batch stays cancelled (issue 29, items 3 and 10; migration
…_one_lock_order.sql).

Item 3: an operator's retry of a failed job of a cancelled batch. Before the migration the
retry went through, the batch went back to `processing` and the next claim built the job
(only enqueue checked `cancelled_at`). At head the job is refused (`batch_cancelled`) or,
for the `--failed` and `--batch` selections, left out; the batch stays cancelled and no
claim takes the job. The race form holds the cancel's transaction open while the retry
runs (the retry is observed blocked on it through pg_blocking_pids).

Item 10: `ingest cancel` on a batch with nothing open. Before: `nothing_open`, the batch is
not marked cancelled and a later enqueue into it is accepted. At head the batch is marked
cancelled (answer `ok` with `nothing_open: true`) and the enqueue is refused (IF002).

Each test runs just before the migration (where it observes the defect) and at head.
"""

from __future__ import annotations

from uuid import UUID

import psycopg
import pytest

from ingestion_pipeline.errors import BatchWasCancelled
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import (
    Background,
    backend_pid,
    batch,
    documents_of,
    enqueue_into,
    index_document,
    job,
    seed_batch,
    seed_job,
    wait_until_blocked,
)


def failed_and_open(conn: psycopg.Connection) -> tuple[UUID, UUID, UUID]:
    """A batch with one job failed for good and one still pending (no other job may be
    pending when it is called). Returns (batch, failed job, open job)."""
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    _, failed_id = seed_job(conn, batch_id)
    [claim] = rpc.claim("W")
    assert claim.job_id == failed_id
    assert rpc.fail_or_retry(
        claim.job_id,
        claim.document_id,
        worker_id="W",
        lease_token=claim.lease_token,
        retry=False,
        error_message="broken",
    ).ok
    _, open_id = seed_job(conn, batch_id)
    return batch_id, failed_id, open_id


def retry(conn: psycopg.Connection, form: str, batch_id: UUID, job_id: UUID) -> dict:
    """The operator's retry in one of its forms, answered as the SQL function answers."""
    rpc = AnySchemaRpc(conn)
    if form == "single":
        return rpc.retry(job_id).model_dump(mode="json")
    selection = {"failed": {}, "batch": {"batch_id": batch_id}, "ids": {"job_ids": [job_id]}}[form]
    return rpc.retry_failed(**selection).model_dump(mode="json")


def retried(answer: dict, job_id: UUID) -> bool:
    return answer["ok"] and (answer.get("job_id") == str(job_id) or str(job_id) in answer.get("job_ids", []))


def assert_refused_as_cancelled(answer: dict, form: str, job_id: UUID) -> None:
    """Head: `single` and `ids` name the job with reason batch_cancelled; the `failed` and
    `batch` selections never pick it (neither retried nor refused)."""
    if form == "single":
        assert (answer["ok"], answer["reason"], answer["job_id"]) == (False, "batch_cancelled", str(job_id))
        return
    assert answer["ok"] and str(job_id) not in answer["job_ids"], answer
    refusals = [r for r in answer["refused"] if r["job_id"] == str(job_id)]
    assert refusals == ([{"job_id": str(job_id), "reason": "batch_cancelled"}] if form == "ids" else [])


FORMS = ["failed", "batch", "ids", "single"]  # retry --failed, retry --batch, retry <ids>, retry_ingestion_job


@pytest.mark.parametrize("form", FORMS)
def test_a_retry_does_not_reopen_a_cancelled_batch(lock_order_schema, new_conn, form):
    """The batch (one failed job, one pending) is cancelled, then the failed job is
    retried. Before: retried; the batch is `processing` again and the next claim takes the
    job. Head: refused or left out; job and batch unchanged, nothing to claim."""
    conn = new_conn(lock_order_schema.url)
    batch_id, failed_id, open_id = failed_and_open(conn)
    cancelled = AnySchemaRpc(conn).cancel_batch(batch_id)
    assert cancelled.ok and cancelled.job_ids == [open_id]
    assert batch(conn, batch_id)["status"] == "cancelled"
    job_before, batch_before = job(conn, failed_id), batch(conn, batch_id)

    answer = retry(conn, form, batch_id, failed_id)
    claims = AnySchemaRpc(conn).claim("W2")
    if not lock_order_schema.hardened:
        assert retried(answer, failed_id), answer
        assert batch(conn, batch_id)["status"] == "processing"
        assert batch(conn, batch_id)["cancelled_at"] is not None  # cancelled, and open again
        assert [c.job_id for c in claims] == [failed_id]
        return
    assert_refused_as_cancelled(answer, form, failed_id)
    assert (job(conn, failed_id), batch(conn, batch_id)) == (job_before, batch_before)
    assert claims == []


def test_the_failed_selection_still_retries_other_batches(lock_order_schema, new_conn):
    """`retry --failed` with a cancelled batch and a live one, each with a failed job: only
    the live batch's job is retried at head (before: both are)."""
    conn = new_conn(lock_order_schema.url)
    cancelled_batch, cancelled_job, _ = failed_and_open(conn)
    assert AnySchemaRpc(conn).cancel_batch(cancelled_batch).ok
    live_batch, live_job, _ = failed_and_open(conn)

    answer = AnySchemaRpc(conn).retry_failed()
    expected = {live_job} if lock_order_schema.hardened else {live_job, cancelled_job}
    assert set(answer.job_ids) == expected and answer.refused == []
    assert batch(conn, live_batch)["status"] == "processing"
    assert batch(conn, cancelled_batch)["status"] == ("cancelled" if lock_order_schema.hardened else "processing")


@pytest.mark.parametrize("form", ["ids", "single", "failed"])
def test_a_retry_waiting_on_the_cancel_is_refused_once_it_commits(lock_order_schema, new_conn, form):
    """The cancel runs in a transaction left open; the retry of the batch's failed job
    starts meanwhile and is observed blocked on it; then the cancel commits. Before: the
    retry goes through after the commit, the batch is `processing` and the job is claimed.
    Head: the retry does not retry the job (for `ids` and `single` it names it
    `batch_cancelled`; the `--failed` selection may have picked it before the cancel
    committed, so it may list it as refused, with that reason, or leave it out); the batch
    stays cancelled and nothing can be claimed."""
    setup, canceller, operator = (new_conn(lock_order_schema.url) for _ in range(3))
    batch_id, failed_id, _ = failed_and_open(setup)
    operator_pid = backend_pid(operator)
    with canceller.transaction():
        assert AnySchemaRpc(canceller).cancel_batch(batch_id).ok
        retrying = Background(lambda: retry(operator, form, batch_id, failed_id))
        wait_until_blocked(setup, operator_pid, by=backend_pid(canceller))
    answer = retrying.join()

    claims = AnySchemaRpc(setup).claim("W2")
    if not lock_order_schema.hardened:
        assert retried(answer, failed_id), answer
        assert batch(setup, batch_id)["status"] == "processing"
        assert [c.job_id for c in claims] == [failed_id]
        return
    assert not retried(answer, failed_id), answer
    if form == "failed":
        reasons = [r["reason"] for r in answer["refused"] if r["job_id"] == str(failed_id)]
        assert reasons in ([], ["batch_cancelled"])
    else:
        assert_refused_as_cancelled(answer, form, failed_id)
    assert (job(setup, failed_id)["status"], batch(setup, batch_id)["status"]) == ("failed", "cancelled")
    assert claims == []


# -- 10. cancel a batch with nothing open ------------------------------------------------


@pytest.mark.parametrize("contents", ["empty", "all_finished"])
def test_a_batch_with_nothing_open_is_cancelled_and_takes_no_new_files(lock_order_schema, new_conn, contents):
    """`ingest cancel` on a batch with no job yet, or whose jobs all finished, then one more
    file enqueued into it. Before: `nothing_open`, cancelled_at stays null and the file is
    accepted (the batch reopens). Head: ok with nothing_open true and the batch cancelled;
    the enqueue raises IF002 (BatchWasCancelled) and its document goes with it."""
    conn = new_conn(lock_order_schema.url)
    batch_id = seed_batch(conn)
    if contents == "all_finished":
        seed_job(conn, batch_id)
        index_document(AnySchemaRpc(conn), conn)

    answer = conn.execute("select cancel_import_batch(p_batch_id => %s) as result", (batch_id,)).fetchone()["result"]
    documents = documents_of(conn, batch_id)
    if not lock_order_schema.hardened:
        assert (answer["ok"], answer["reason"]) == (False, "nothing_open")
        assert batch(conn, batch_id)["cancelled_at"] is None
        enqueue_into(conn, batch_id)  # accepted
        assert batch(conn, batch_id)["status"] == "processing"
        return
    keys = ("ok", "batch_id", "cancelled", "in_flight", "job_ids", "nothing_open")
    assert {key: answer.get(key) for key in keys} == {
        "ok": True,
        "batch_id": str(batch_id),
        "cancelled": 0,
        "in_flight": 0,
        "job_ids": [],
        "nothing_open": True,
    }
    assert answer["batch"]["status"] == "cancelled"
    row = batch(conn, batch_id)
    assert (row["status"], row["cancelled_at"] is not None) == ("cancelled", True)
    with pytest.raises(BatchWasCancelled):
        enqueue_into(conn, batch_id)
    assert documents_of(conn, batch_id) == documents
    assert batch(conn, batch_id)["status"] == "cancelled"
