"""R7: a retry is granted only while attempts remain."""

from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import batch, job, seed_batch, seed_job


def test_retry_of_an_exhausted_job_is_terminal(schema, new_conn):
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id, max_attempts=1)
    [claimed] = rpc.claim("worker-a")
    assert claimed.attempt_count == claimed.max_attempts == 1

    outcome = rpc.fail_or_retry(
        job_id, document_id, worker_id="worker-a", retry=True, error_message="connection reset", batch_id=batch_id
    )
    assert outcome.ok

    if schema.hardened:
        assert job(conn, job_id)["status"] == "failed"
        assert outcome.retried is False and outcome.attempts_exhausted is True
        assert batch(conn, batch_id)["status"] == "completed_with_errors"
        assert batch(conn, batch_id)["failed_files"] == 1
    else:
        # The bug: re-pended, never claimable again, and the batch never finishes.
        assert job(conn, job_id)["status"] == "pending"
        assert rpc.claim("worker-b") == []
        assert batch(conn, batch_id)["status"] == "processing"


def test_retry_with_attempts_left_is_granted(db_url, new_conn):
    conn = new_conn(db_url)
    rpc = AnySchemaRpc(conn)
    document_id, job_id = seed_job(conn, max_attempts=2)
    rpc.claim("worker-a")
    outcome = rpc.fail_or_retry(job_id, document_id, worker_id="worker-a", retry=True)
    assert outcome.retried is True
    assert job(conn, job_id)["status"] == "pending"
    assert [j.attempt_count for j in rpc.claim("worker-b")] == [2]
