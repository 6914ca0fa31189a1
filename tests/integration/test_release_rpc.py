"""release_ingestion_job (migration …_release_worker_faults.sql): fenced by the token, the
attempt refunded at most max_attempts times per job, charged like a retry after that."""

from __future__ import annotations

from ingestion_pipeline.db.models import FailItem
from ingestion_pipeline.db.rpc import IngestionRpc
from tests.helpers import seed_job


def job_row(conn, job_id) -> dict:
    return conn.execute(
        "select status, attempt_count, worker_faults, lease_token, error_message from ingestion_jobs where id = %s",
        (job_id,),
    ).fetchone()


def release_item(claimed, token: int | None = None) -> FailItem:
    return FailItem(
        claimed.job_id,
        claimed.document_id,
        claimed.lease_token if token is None else token,
        retry=True,
        error_message="the process parsing the document died (killed by SIGKILL)",
        stage="retry_wait",
        retry_delay_seconds=0.0,
        worker_id="w",
    )


def test_a_release_is_fenced_and_refunds_at_most_max_attempts_worker_faults(conn):
    document_id, job_id = seed_job(conn, max_attempts=2)
    rpc = IngestionRpc(conn)
    outcomes = []
    for _ in range(4):  # two refunded faults, then two charged ones
        (claimed,) = rpc.claim("w")
        stale = rpc.release(release_item(claimed, token=claimed.lease_token - 1))
        assert stale.lease_lost and job_row(conn, job_id)["status"] == "processing"  # nothing changed
        outcomes.append(rpc.release(release_item(claimed)))
        row = job_row(conn, job_id)
        assert row["error_message"].startswith("the process parsing the document died")
    assert [(o.refunded, o.retried, o.worker_faults) for o in outcomes] == [
        (True, True, 1),
        (True, True, 2),
        (False, True, 3),
        (False, False, 4),
    ]
    row = job_row(conn, job_id)
    assert (row["status"], row["attempt_count"], row["worker_faults"]) == ("failed", 2, 4)
    assert conn.execute("select status from documents where id = %s", (document_id,)).fetchone()["status"] == "failed"
    assert rpc.claim("w") == []
