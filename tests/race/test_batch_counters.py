"""R9 on the batch counters (migration …_batch_counters_and_bulk_acks.sql): the last two
jobs of a batch of two finish in overlapping transactions, for every pairing of
transitions that ends the batch or keeps it open.

The first transition runs in a transaction left open; the second starts meanwhile. Before
the hardening each transition recounted the batch without a lock, so the second counted
from a snapshot without the first, waited on the batch row, and then wrote its stale
count. At head each moves the counters by one UPDATE under the batch row lock, so the
second applies its delta to the first one's row: counters and status are exact. A retry
while attempts remain keeps its job open and moves nothing, so at head it does not even
wait for the batch row.
"""

import pytest

from ingestion_pipeline.db.models import ClaimedJob, CompleteItem
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import Background, backend_pid, batch, seed_batch, seed_job, wait_until_blocked


def finish(rpc: AnySchemaRpc, claim: ClaimedJob, how: str) -> bool:
    """Finish the claimed job `how`; the job's token at head, its worker id before (the
    claim returns no token there). True when the call went through."""
    worker, token = claim.locked_by, claim.lease_token
    if how == "complete":
        return rpc.complete(claim.job_id, claim.document_id, worker_id=worker, lease_token=token).ok
    if how == "bulk":  # before BULK_ACK the client makes one call per item, in this transaction
        return all(r.ok for r in rpc.complete_many(worker, [CompleteItem(claim.job_id, claim.document_id, token)]))
    if how == "fail":  # a final failure
        return rpc.fail_or_retry(
            claim.job_id, claim.document_id, worker_id=worker, lease_token=token, retry=False, error_message="broken"
        ).ok
    if how == "retry":  # attempts remain (1 of 3 used): the job goes back to pending
        outcome = rpc.fail_or_retry(
            claim.job_id, claim.document_id, worker_id=worker, lease_token=token, retry=True, error_message="transient"
        )
        return outcome.ok and outcome.retried
    raise ValueError(how)


# (first, second) -> the batch at head: status, total, completed, failed, open.
AT_HEAD = {
    ("complete", "complete"): ("completed", 2, 2, 0, 0),
    ("complete", "fail"): ("completed_with_errors", 2, 1, 1, 0),
    ("fail", "complete"): ("completed_with_errors", 2, 1, 1, 0),
    ("complete", "retry"): ("processing", 2, 1, 0, 1),
    ("bulk", "complete"): ("completed", 2, 2, 0, 0),
    ("complete", "bulk"): ("completed", 2, 2, 0, 0),
}
# Before the hardening the batch is what the second transaction counted alone: the first
# job still `processing`. (status, total, completed, failed)
BEFORE = {
    ("complete", "complete"): ("processing", 2, 1, 0),  # stale status: never terminal
    ("complete", "fail"): ("processing", 2, 0, 1),
    ("fail", "complete"): ("processing", 2, 1, 0),
    ("complete", "retry"): ("processing", 2, 0, 0),  # status right, the completion lost from the count
    ("bulk", "complete"): ("processing", 2, 1, 0),
    ("complete", "bulk"): ("processing", 2, 1, 0),
}


@pytest.mark.parametrize("first,second", list(AT_HEAD), ids=["/".join(pair) for pair in AT_HEAD])
def test_the_last_two_transitions_of_a_batch_leave_exact_counters(schema, new_conn, first, second):
    setup = new_conn(schema.url)
    batch_id = seed_batch(setup)
    seed_job(setup, batch_id, max_attempts=3)
    seed_job(setup, batch_id, max_attempts=3)
    setup_rpc = AnySchemaRpc(setup)
    [one] = setup_rpc.claim("worker-1")
    [two] = setup_rpc.claim("worker-2")
    assert (one.lease_token is not None) == (two.lease_token is not None) == schema.hardened

    # Transaction 1 finishes the first job and stays open (it holds the batch row).
    tx1 = new_conn(schema.url, autocommit=False)
    assert finish(AnySchemaRpc(tx1), one, first)

    # Transaction 2 finishes the second job meanwhile.
    tx2 = new_conn(schema.url)
    tx2_pid = backend_pid(tx2)
    second_done = Background(lambda: finish(AnySchemaRpc(tx2), two, second))
    if schema.hardened and second == "retry":
        assert second_done.join() is True  # moves no counter: never waits for the batch row
    else:
        wait_until_blocked(setup, tx2_pid, by=backend_pid(tx1))
    tx1.commit()
    assert second_done.join() is True

    final = batch(setup, batch_id)
    got = (final["status"], final["total_files"], final["completed_files"], final["failed_files"])
    if not schema.hardened:
        assert got == BEFORE[first, second]
        assert final["completed_at"] is None
        return
    assert (*got, final["open_files"]) == AT_HEAD[first, second]
    assert (final["completed_at"] is not None) == (final["status"] != "processing")
    assert setup_rpc.queue_health().batch_counter_drift == 0
