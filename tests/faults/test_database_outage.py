"""The database goes away under a running worker: the worker exits non-zero with one
clear line, nothing is half-written, and after a restart every job still finishes."""

import os
import subprocess
import sys
import time
from pathlib import Path

from ingestion_pipeline.db import embedded
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect
from tests.faults.checker import check
from tests.faults.harness import seed_documents
from tests.helpers import make_lease_stale
from tests.search_server_off import SEARCH_SERVER_OFF

INGEST = Path(sys.executable).parent / "ingest"
SETTINGS = {
    "INGEST_CLAIM_RETRY_ATTEMPTS": "2",
    "INGEST_CONNECT_TIMEOUT_SECONDS": "2",
    "INGEST_STALE_AFTER_SECONDS": "2",
    "INGEST_HEARTBEAT_INTERVAL_SECONDS": "0.5",
    "INGEST_RETRY_BACKOFF_SECONDS": "0",
    "INGEST_WORKER_CONCURRENCY": "2",
}
# Enough that the stop lands with jobs pending after the first 20 complete; the restart's
# drain of the rest is what the test measures, not the queue's length (400 took ~70 s loaded).
DOCUMENTS = 120


def completed(url: str) -> int:
    with connect(url) as conn:
        return conn.execute("select count(*) as n from ingestion_jobs where status = 'completed'").fetchone()["n"]


def test_a_database_stop_mid_run_ends_the_worker_clearly_and_loses_nothing(tmp_path):
    data_dir = tmp_path / "pg"
    url = embedded.start(data_dir)
    try:
        migrator.migrate(url)
        seed_documents(url, DOCUMENTS, 2)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("INGEST_") and k != "DATABASE_URL"},
            **SEARCH_SERVER_OFF,
            **SETTINGS,
        }
        worker = subprocess.Popen(
            [str(INGEST), "work", "--database-url", url],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while completed(url) < 20:
            assert worker.poll() is None and time.monotonic() < deadline, worker.communicate()
            time.sleep(0.05)
        embedded.stop(data_dir)  # mid-run: jobs in flight, more pending

        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 1, (out, err)
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1].startswith("ingest: error: database unavailable")

        url = embedded.start(data_dir)
        with connect(url) as conn:  # the dead worker's leases: past their deadline
            for row in conn.execute("select id from ingestion_jobs where status = 'processing'").fetchall():
                make_lease_stale(conn, row["id"])
        drain = subprocess.run(
            [str(INGEST), "work", "--drain", "--database-url", url],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert drain.returncode == 0, drain.stderr
        report = check(url, [])
        assert report.violations == [], report.summary()
        assert report.stats["jobs"] == {"completed": DOCUMENTS}
        assert report.stats["documents"] == {"indexed": DOCUMENTS}, report.summary()
        assert report.stats["indexed"] == DOCUMENTS, report.summary()
    finally:
        embedded.stop(data_dir)
