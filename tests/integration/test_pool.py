"""The connection pool after the server dropped its idle connections (restart, failover,
an idle-session kill): the pool must check a connection before handing it out, so the
worker's next job runs on live connections and completes on its first attempt."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Outcome, Worker
from tests.helpers import job

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
APP = "ingest-test-idle-victim"


def test_worker_completes_a_job_after_the_server_dropped_every_idle_connection(db_url, conn, tmp_path):
    # One claim attempt: a dead connection handed to the claim ends the run at once (without
    # a check the claim rode through dead connections with 2+4+8+16 s of waits). Ten dead
    # connections: psycopg_pool's own check alone finds them one by one with a growing
    # back-off (1+2+4+8 s) and gives up at the pool timeout.
    settings = load_settings(
        database_url=db_url, retry_backoff_seconds=0, pool_min_size=10, pool_max_size=10, claim_retry_attempts=1
    )
    shutil.copy(FIXTURES / "sample.md", tmp_path / "sample.md")
    pool = make_pool(db_url, settings, application_name=APP)
    try:
        report = enqueue_paths(pool, [tmp_path / "sample.md"], max_bytes=settings.max_file_bytes)
        pool.wait(timeout=10)  # all ten connections open and idle in the pool
        assert pool.get_stats()["pool_available"] == 10
        killed = conn.execute(
            "select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity "
            "where application_name = %s",
            (APP,),
        ).fetchone()["n"]
        assert killed == 10

        started = time.monotonic()
        result = Worker(pool, settings, concurrency=1).run(drain=True)
        elapsed = time.monotonic() - started
    finally:
        pool.close()

    assert [r.outcome for r in result.results] == [Outcome.COMPLETED]
    stored = job(conn, report.files[0].job_id)
    assert (stored["status"], stored["attempt_count"]) == ("completed", 1)  # no attempt burnt
    assert elapsed < 5, f"the worker waited {elapsed:.1f}s for live connections"
