"""The zombie case, forced: a worker paused mid-build past its lease, reclaimed and
finished by another, then resumed. At head the checker finds nothing; on the
pre-hardening schema the same history shows violations (the harness can fail)."""

import json
import signal
import time

import pytest

from ingestion_pipeline.db.connection import connect
from tests.faults.checker import check
from tests.faults.harness import WorkerFleet, seed_documents
from tests.helpers import make_lease_stale

# Worker processes under faults: the client's and the workers' behaviour, run once (conftest.py).
pytestmark = pytest.mark.one_server


def wait_for(condition, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def the_job(url):
    with connect(url) as conn:
        return conn.execute("select id, status, locked_by from ingestion_jobs").fetchone()


def calls_after(path, moment):
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["t0"] > moment]


def test_a_resumed_zombie_is_fenced_out(schema, tmp_path):
    seed_documents(schema.url, 1, 1)
    fleet = WorkerFleet(schema.url, tmp_path, 2)
    try:
        zombie = fleet.start(slow_seconds=3)
        marker = fleet.history(zombie).with_suffix(".embedding")
        wait_for(marker.exists, "the first worker to be mid-build")
        fleet.processes[zombie].send_signal(signal.SIGSTOP)
        with connect(schema.url) as conn:
            make_lease_stale(conn, the_job(schema.url)["id"])  # its lease is now past the stale window

        fleet.start()
        wait_for(lambda: the_job(schema.url)["status"] == "completed", "the second worker to finish the job")
        resumed_at = time.time()
        fleet.processes[zombie].send_signal(signal.SIGCONT)
        wait_for(lambda: calls_after(fleet.history(zombie), resumed_at), "the zombie's next call")
    finally:
        fleet.stop_all()

    report = check(schema.url, fleet.histories())
    if schema.hardened:
        assert report.violations == [], report.summary()
    else:
        assert any("completed ok 2 times" in v for v in report.violations), report.summary()
        assert any("accepted after" in v for v in report.violations), report.summary()
