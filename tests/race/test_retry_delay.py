"""The server-retry-delay migration (`…_server_retry_delay.sql`), on the schema just
before it (the bug is observed) and at head (it is gone):

- a retry's next_run_at was computed on the worker's clock but compared with the
  server's now() by the claim: a worker whose clock runs an hour behind re-queued a
  retry that was claimable at once, with no backoff;
- a retry requested on the final attempt is refused and the job ends failed, but its
  stage read the caller's `retry_wait`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import tests.any_schema_rpc as rpc_module
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import job, seed_job


class SkewedClock(datetime):
    """A worker machine whose clock runs an hour behind the database server's."""

    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz) - timedelta(hours=1)


def test_a_retry_waits_its_delay_on_the_servers_clock(retry_delay_schema, new_conn, monkeypatch):
    conn = new_conn(retry_delay_schema.url)
    rpc = AnySchemaRpc(conn)
    document_id, job_id = seed_job(conn, max_attempts=3)
    [claimed] = rpc.claim("worker-1")
    monkeypatch.setattr(rpc_module, "datetime", SkewedClock)

    outcome = rpc.fail_or_retry(
        job_id,
        document_id,
        worker_id="worker-1",
        lease_token=claimed.lease_token,
        retry=True,
        error_message="transient",
        retry_delay_seconds=60,
        stage="retry_wait",
    )

    assert outcome.ok and outcome.retried
    wait = conn.execute(
        "select extract(epoch from next_run_at - now()) as s from ingestion_jobs where id = %s", (job_id,)
    ).fetchone()["s"]
    reclaimed = rpc.claim("worker-2")
    if retry_delay_schema.hardened:
        assert 55 <= wait <= 60 and reclaimed == []
    else:  # next_run_at an hour in the past: the retry is claimable at once
        assert wait < -3000 and [j.job_id for j in reclaimed] == [job_id]


def test_a_refused_retry_stores_the_failed_stage(retry_delay_schema, new_conn):
    conn = new_conn(retry_delay_schema.url)
    rpc = AnySchemaRpc(conn)
    document_id, job_id = seed_job(conn, max_attempts=1)
    [claimed] = rpc.claim("worker-1")

    outcome = rpc.fail_or_retry(
        job_id,
        document_id,
        worker_id="worker-1",
        lease_token=claimed.lease_token,
        retry=True,
        error_message="transient",
        retry_delay_seconds=5,
        stage="retry_wait",
    )

    assert outcome.ok and not outcome.retried and outcome.attempts_exhausted
    stored = job(conn, job_id)
    assert stored["status"] == "failed"
    assert stored["stage"] == ("failed" if retry_delay_schema.hardened else "retry_wait")
