"""The batch counters at head (docs/state-machine.md, "Batches"): every transition moves
total/open/completed/failed and the status by one UPDATE of the batch row; the count
under the row lock is the repair path, safe against a transition in flight in either
order; drift is reported by `ingest health` and healed by the repair path and the janitor.
"""

import pytest

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.worker.janitor import run_janitor
from tests.helpers import (
    Background,
    backend_pid,
    batch,
    make_lease_stale,
    seed_batch,
    seed_document,
    seed_job,
    wait_until_blocked,
)


def counters(conn, batch_id) -> tuple:
    row = batch(conn, batch_id)
    return row["status"], row["total_files"], row["open_files"], row["completed_files"], row["failed_files"]


def claim_one(rpc, worker_id="worker-1"):
    [claimed] = rpc.claim(worker_id)
    return claimed


def complete(rpc, claimed):
    return rpc.complete(
        claimed.job_id, claimed.document_id, worker_id=claimed.locked_by, lease_token=claimed.lease_token
    )


def fail(rpc, claimed):
    return rpc.fail_or_retry(
        claimed.job_id,
        claimed.document_id,
        worker_id=claimed.locked_by,
        lease_token=claimed.lease_token,
        retry=False,
        error_message="broken",
    )


def test_enqueue_counts_a_new_job_and_nothing_for_a_duplicate(conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    assert counters(conn, batch_id) == ("pending", 0, 0, 0, 0)
    document_id, _ = seed_job(conn, batch_id)
    assert counters(conn, batch_id) == ("processing", 1, 1, 0, 0)
    seed_job(conn, batch_id)
    assert counters(conn, batch_id) == ("processing", 2, 2, 0, 0)
    assert rpc.enqueue(document_id, batch_id=batch_id).reason == "already_queued"
    assert counters(conn, batch_id) == ("processing", 2, 2, 0, 0)
    assert batch(conn, batch_id)["completed_at"] is None


def test_a_completed_batch_that_gets_a_new_job_is_processing_again(conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    assert complete(rpc, claim_one(rpc)).ok
    assert counters(conn, batch_id) == ("completed", 1, 0, 1, 0)
    assert batch(conn, batch_id)["completed_at"] is not None

    assert rpc.enqueue(seed_document(conn, batch_id), batch_id=batch_id).ok
    assert counters(conn, batch_id) == ("processing", 2, 1, 1, 0)
    assert batch(conn, batch_id)["completed_at"] is None

    assert complete(rpc, claim_one(rpc)).ok
    assert counters(conn, batch_id) == ("completed", 2, 0, 2, 0)
    assert batch(conn, batch_id)["completed_at"] is not None


def test_the_operators_retry_of_a_failed_job_reopens_its_batch(conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    _, job_id = seed_job(conn, batch_id)
    assert fail(rpc, claim_one(rpc)).ok
    assert counters(conn, batch_id) == ("completed_with_errors", 1, 0, 0, 1)

    assert rpc.retry(job_id).ok
    assert counters(conn, batch_id) == ("processing", 1, 1, 0, 0)
    assert batch(conn, batch_id)["completed_at"] is None

    assert complete(rpc, claim_one(rpc)).ok
    assert counters(conn, batch_id) == ("completed", 1, 0, 1, 0)


def test_a_success_settles_a_failed_sibling_in_another_batch(conn):
    """A document failed in batch A and is enqueued again in batch B: its success moves
    B (open -1, completed +1) and A (failed -1, completed +1)."""
    rpc = IngestionRpc(conn)
    batch_a, batch_b = seed_batch(conn, "a"), seed_batch(conn, "b")
    document_id, _ = seed_job(conn, batch_a)
    assert fail(rpc, claim_one(rpc)).ok
    assert rpc.enqueue(document_id, batch_id=batch_b).ok
    assert complete(rpc, claim_one(rpc)).ok
    assert counters(conn, batch_a) == ("completed", 1, 0, 1, 0)
    assert counters(conn, batch_b) == ("completed", 1, 0, 1, 0)
    assert rpc.queue_health().batch_counter_drift == 0


def test_a_dead_lettered_job_moves_from_open_to_failed(conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    _, dead = seed_job(conn, batch_id, max_attempts=1)
    seed_job(conn, batch_id)
    assert claim_one(rpc).job_id == dead
    make_lease_stale(conn, dead)

    expired = rpc.expire_stale()
    assert expired.job_ids == [dead]
    assert counters(conn, batch_id) == ("processing", 2, 1, 0, 1)
    assert complete(rpc, claim_one(rpc)).ok
    assert counters(conn, batch_id) == ("completed_with_errors", 2, 0, 1, 1)


@pytest.fixture
def two_claimed(conn):
    """A batch of two claimed jobs."""
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    seed_job(conn, batch_id)
    return batch_id, claim_one(rpc, "worker-1"), claim_one(rpc, "worker-2")


def test_a_refresh_waits_for_a_completion_holding_the_batch_row_then_counts_it(db_url, conn, new_conn, two_claimed):
    batch_id, first, _ = two_claimed
    completion = new_conn(db_url, autocommit=False)
    assert complete(IngestionRpc(completion), first).ok  # holds the batch row until commit

    refresher = new_conn(db_url)
    refresher_pid = backend_pid(refresher)
    refresh = Background(lambda: IngestionRpc(refresher).refresh_batch(batch_id))
    wait_until_blocked(conn, refresher_pid, by=backend_pid(completion))
    completion.commit()

    refreshed = refresh.join()
    assert (refreshed.status, refreshed.total, refreshed.open, refreshed.completed) == ("processing", 2, 1, 1)
    assert counters(conn, batch_id) == ("processing", 2, 1, 1, 0)


def test_a_completion_in_flight_when_the_refresh_counts_applies_its_delta_after_it(db_url, conn, new_conn, two_claimed):
    """The completion has changed its job (uncommitted) when the refresh locks the batch
    and counts; its batch UPDATE then waits for the refresh and applies -1 on top."""
    batch_id, first, second = two_claimed
    # Pause the completion between its job UPDATE and its batch UPDATE: on its document.
    document_lock = new_conn(db_url, autocommit=False)
    document_lock.execute("select 1 from documents where id = %s for no key update", (first.document_id,))
    completer = new_conn(db_url)
    completer_pid = backend_pid(completer)
    completion = Background(lambda: complete(IngestionRpc(completer), first))
    wait_until_blocked(conn, completer_pid, by=backend_pid(document_lock))
    assert (
        conn.execute("select status from ingestion_jobs where id = %s", (first.job_id,)).fetchone()["status"]
        == "processing"
    )  # not committed

    refresher = new_conn(db_url, autocommit=False)
    refreshed = IngestionRpc(refresher).refresh_batch(batch_id)  # holds the batch row until commit
    assert (refreshed.open, refreshed.completed) == (2, 0)
    document_lock.rollback()
    wait_until_blocked(conn, completer_pid, by=backend_pid(refresher))
    refresher.commit()

    assert completion.join().ok
    assert counters(conn, batch_id) == ("processing", 2, 1, 1, 0)
    assert complete(IngestionRpc(conn), second).ok
    assert counters(conn, batch_id) == ("completed", 2, 0, 2, 0)


DRIFTS = {
    "counters": "update import_batches set completed_files = 7, open_files = 0 where id = %s",
    "status": "update import_batches set status = 'completed', completed_at = now() where id = %s",
}


@pytest.mark.parametrize("drift", list(DRIFTS))
def test_drift_is_reported_and_the_repair_path_heals_it(conn, drift):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    seed_job(conn, batch_id)
    assert complete(rpc, claim_one(rpc)).ok
    assert rpc.queue_health().batch_counter_drift == 0
    conn.execute(DRIFTS[drift], (batch_id,))

    health = rpc.queue_health()
    assert health.batch_counter_drift == 1
    assert any("counters disagree" in problem for problem in problems(health))

    healed = rpc.refresh_drifted_batches()
    assert (healed.refreshed, [b.batch_id for b in healed.batches]) == (1, [batch_id])
    assert counters(conn, batch_id) == ("processing", 2, 1, 1, 0)
    assert batch(conn, batch_id)["completed_at"] is None
    assert rpc.queue_health().batch_counter_drift == 0
    assert rpc.refresh_drifted_batches().refreshed == 0


def test_the_janitor_heals_drift(conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    assert complete(rpc, claim_one(rpc)).ok
    conn.execute(DRIFTS["counters"], (batch_id,))

    report = run_janitor(rpc, batch_size=100, time_budget_seconds=5)
    assert report["drifted_batches"] == 1
    assert counters(conn, batch_id) == ("completed", 1, 0, 1, 0)
    assert rpc.queue_health().batch_counter_drift == 0


def problems(health) -> list[str]:
    from ingestion_pipeline.health import queue_checks

    return [check.message for check in queue_checks(health, max_pending_age_seconds=3600) if not check.passed]
