"""Syncs of a churning folder (issue 32): a writer process adds, rewrites and deletes files
while `ingest sync` passes run one after another and worker processes drain, one of them
killed mid-run. After the writer stops, one final sync and the drain: every live document's
file exists, and every file is indexed at a latest version whose bytes are the file's
(checker.check_source), with the queue's own rules (checker.check) holding too. The two
source rules each have a mutation test: a final sync that may not delete, and a change a
sync cannot see (same size, same modification time)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.sync import SyncOptions, sync_source
from ingestion_pipeline.settings import load_settings
from tests.faults.checker import Report, check, check_source
from tests.faults.churn import seed
from tests.faults.harness import ROOT, WorkerFleet, janitor_pass, open_jobs

pytestmark = pytest.mark.one_server

COLLECTION = "churn"
CHURN_SECONDS = 5
MAX_ATTEMPTS = 6  # a killed worker costs its jobs an attempt; none may run out here


def sync(url: str, folder: Path, **options) -> dict[str, int]:
    settings = load_settings(database_url=url)
    with make_pool(url, settings) as pool:
        report = sync_source(pool, str(folder), SyncOptions(COLLECTION, 100_000, max_attempts=MAX_ATTEMPTS, **options))
    return dict(report.counts)


def drain(url: str, fleet: WorkerFleet, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while open_jobs(url):
        assert time.monotonic() < deadline, f"{open_jobs(url)} job(s) still open"
        janitor_pass(url)
        time.sleep(0.5)


@pytest.fixture
def fleet(db_url, tmp_path):
    workers = WorkerFleet(db_url, tmp_path / "histories", size=2)
    (tmp_path / "histories").mkdir()
    yield workers
    workers.stop_all()


def test_a_churning_folder_ends_mirrored(db_url, fleet, tmp_path):
    folder, stop = tmp_path / "share", tmp_path / "stop"
    seed(folder, random.Random(7))
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.churn", str(folder), str(stop), "11"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    first = fleet.start()
    fleet.start()
    passes: list[dict[str, int]] = []
    try:
        deadline = time.monotonic() + CHURN_SECONDS
        killed = False
        while time.monotonic() < deadline:
            passes.append(sync(db_url, folder))
            if not killed and len(passes) >= 2:
                fleet.processes[first].send_signal(signal.SIGKILL)  # mid-build, its leases left to expire
                fleet.start()
                killed = True
    finally:
        stop.touch()
        writer.wait(timeout=30)
    passes.append(sync(db_url, folder))  # the final sync, the folder at rest
    drain(db_url, fleet)

    total = {change: sum(p.get(change, 0) for p in passes) for change in ("new", "changed", "deleted")}
    assert len(passes) >= 4 and all(total.values()), (passes, total)  # the churn was seen in every form
    report = check(db_url, fleet.histories())
    check_source(db_url, COLLECTION, folder, report)
    assert not report.violations, report.summary()


def test_mutation_a_final_sync_that_may_not_delete_leaves_a_vanished_file_live(db_url, fleet, tmp_path):
    folder = tmp_path / "share"
    seed(folder, random.Random(3))
    sync(db_url, folder)
    next(folder.rglob("*.txt")).unlink()
    sync(db_url, folder, delete=False)
    fleet.start()
    drain(db_url, fleet)
    report = Report()
    check_source(db_url, COLLECTION, folder, report)
    assert dict(report.by_rule) == {"vanished_source_live": 1}, report.summary()


def test_mutation_a_change_the_sync_cannot_see_leaves_old_text_committed(db_url, fleet, tmp_path):
    """Same size and same modification time: the listing says unchanged (the documented limit
    of detection without reading)."""
    folder = tmp_path / "share"
    seed(folder, random.Random(5))
    sync(db_url, folder)
    fleet.start()
    drain(db_url, fleet)
    path = next(folder.rglob("*.txt"))
    before = path.stat()
    path.write_text(path.read_text().swapcase())  # same length
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert sync(db_url, folder) == {"unchanged": len(list(folder.rglob("*.txt")))}
    report = Report()
    check_source(db_url, COLLECTION, folder, report)
    assert dict(report.by_rule) == {"source_text_not_committed": 1}, report.summary()
