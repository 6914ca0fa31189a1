"""Issue 44, defect 11: a fault of the worker's parsing pool is not charged to the documents,
and a hung parse ends at its deadline whatever state the pool is in (worker/isolation.py,
worker/child_tasks.py, migration …_release_worker_faults.sql).

Events are forced, never waited for: each gated document's child writes its pid once it is
inside the parse (tests/fixtures/hostile.py, `gated_process`), and only then does the test
kill or stop it. The outcomes are read from the database."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psutil
import psycopg
import pytest
from psycopg.rows import dict_row

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.processing import ChunkingOptions
from ingestion_pipeline.settings import Settings
from ingestion_pipeline.worker import Worker
from ingestion_pipeline.worker.errors import WorkerFault
from ingestion_pipeline.worker.isolation import ParseLimits, ParsePool
from tests.fixtures.hostile import gated_process, hostile_process
from tests.helpers import Background

pytestmark = pytest.mark.one_server  # processes and signals: the client's subject, run once


def write_corpus(folder: Path, signals: Path, gated: list[str], normal: int) -> Path:
    folder.mkdir()
    signals.mkdir()
    for name in gated:  # a gated document's bytes name the folder the test watches
        (folder / name).write_text(str(signals))
    for number in range(normal):
        (folder / f"doc-{number}.md").write_text(f"# Document {number}\n\n" + "Harbour lanterns. " * 40)
    return folder


def wait_for_pids(signals: Path, count: int, timeout: float = 60.0) -> dict[str, int]:
    """The pids of the children inside a gated parse, by document, once `count` are."""
    deadline = time.monotonic() + timeout
    while len(found := sorted(signals.glob("*.pid"))) < count:
        assert time.monotonic() < deadline, "the gated documents' children never began parsing"
        time.sleep(0.02)
    return {path.name.removesuffix(".pid"): int(path.read_text()) for path in found}


def jobs(url: str) -> dict[str, dict]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        rows = conn.execute(
            "select d.source_name, j.status, j.stage, j.attempt_count, j.error_message, "
            "to_jsonb(j) -> 'worker_faults' as worker_faults "
            "from ingestion_jobs j join documents d on d.id = j.document_id"
        ).fetchall()
    return {row["source_name"]: row for row in rows}


def drain(worker: Worker, url: str, rounds: int = 5) -> None:
    """Drain again while jobs are open (a drain ends when nothing is claimable; a charged
    retry waits for its back-off first)."""
    for _ in range(rounds):
        if all(job["status"] in ("completed", "failed") for job in jobs(url).values()):
            return
        worker.run(drain=True)


def test_a_killed_pool_charges_no_attempt_and_its_jobs_complete_after_the_rebuild(release_schema, tmp_path):
    """Both children of the pool are SIGKILLed while each parses a document: the jobs are
    released with their attempt refunded, the pool is rebuilt, and every job completes on
    its first attempt. On the schema before the release RPC the fallback is a charged retry:
    the bug, observed (attempt 2 of 3 for the two documents the pool dropped)."""
    signals = tmp_path / "signals"
    gated = ["gate-0.txt", "gate-1.txt", "gate-2.txt"]
    folder = write_corpus(tmp_path / "corpus", signals, gated, normal=3)
    settings = Settings(
        database_url=release_schema.url,
        parse_timeout_seconds=120,
        worker_concurrency=4,
        pool_max_size=8,
        retry_backoff_seconds=0.1,
        retry_backoff_max_seconds=0.2,
    )
    with make_pool(release_schema.url, settings) as pool:
        enqueue_paths(pool, [folder], max_bytes=1_000_000)
        worker = Worker(pool, settings, parse_processes=2, parse_target=gated_process)
        run = Background(lambda: worker.run(drain=True))
        inside = wait_for_pids(signals, 2)
        for pid in inside.values():
            os.kill(pid, signal.SIGKILL)
        (signals / "open").touch()
        report = run.join(timeout=120)
        drain(worker, release_schema.url)

    after = jobs(release_schema.url)
    assert {name: job["status"] for name, job in after.items()} == dict.fromkeys(after, "completed")
    for name, job in after.items():
        killed = name in inside
        if release_schema.hardened:
            assert job["attempt_count"] == 1, (name, job)  # the pool's fault cost no attempt
            assert job["worker_faults"] == (1 if killed else 0), (name, job)
        else:
            assert job["attempt_count"] == (2 if killed else 1), (name, job)
    if release_schema.hardened:
        assert report.counts["released"] == 2
        assert report.counts["failed"] == report.counts["retried"] == 0


def test_a_document_that_kills_its_child_every_time_still_fails(db_url, tmp_path):
    """Refunds are bounded per job (its max_attempts): a document whose child dies at every
    parse is charged once they are spent, and ends failed with the reason."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "crash.txt").write_text("a document its parser cannot survive")
    settings = Settings(database_url=db_url, retry_backoff_seconds=0.05, retry_backoff_max_seconds=0.1)
    with make_pool(db_url, settings) as pool:
        enqueue_paths(pool, [folder], max_bytes=1_000_000, max_attempts=2)
        drain(Worker(pool, settings, parse_processes=1, parse_target=hostile_process), db_url, rounds=10)

    job = jobs(db_url)["crash.txt"]
    assert (job["status"], job["attempt_count"], job["worker_faults"]) == ("failed", 2, 4)
    assert job["error_message"].startswith("the process parsing the document died (killed by SIGKILL)")


def test_a_stopped_parse_in_a_wedged_pool_ends_at_its_deadline(db_url, tmp_path):
    """A child takes the pool's channel lock and is SIGSTOPped mid-parse: pebble can no
    longer stop any task, and the heartbeat would renew the job's lease forever. The
    parent's deadline kills the child's process group and fails the job as a timeout; the
    pool is rebuilt, and the other documents complete without an attempt charged."""
    signals = tmp_path / "signals"
    folder = write_corpus(tmp_path / "corpus", signals, ["lockstall-0.txt"], normal=3)
    settings = Settings(
        database_url=db_url,
        parse_timeout_seconds=2,
        worker_concurrency=4,
        pool_max_size=8,
        heartbeat_interval_seconds=0.5,
        retry_backoff_seconds=0.1,
        retry_backoff_max_seconds=0.2,
    )
    with make_pool(db_url, settings) as pool:
        enqueue_paths(pool, [folder], max_bytes=1_000_000)
        worker = Worker(pool, settings, parse_processes=2, parse_target=gated_process)
        run = Background(lambda: worker.run(drain=True))
        stalled = wait_for_pids(signals, 1)["lockstall-0.txt"]
        os.kill(stalled, signal.SIGSTOP)
        run.join(timeout=120)
        drain(worker, db_url)

    after = jobs(db_url)
    stall = after.pop("lockstall-0.txt")
    assert (stall["status"], stall["stage"], stall["error_message"]) == (
        "failed",
        "failed",
        "parsing took longer than 2 s",
    )
    assert stall["attempt_count"] == 1
    assert all(job["status"] == "completed" and job["attempt_count"] == 1 for job in after.values()), after
    assert not psutil.pid_exists(stalled) or psutil.Process(stalled).status() == psutil.STATUS_ZOMBIE


def test_a_pool_broken_by_an_idle_childs_death_is_rebuilt(tmp_path):
    """pebble breaks its whole pool ("All workers expired") when a child dies while no task
    runs, and from then on refuses every task: "Unexpected error within the Pool" (the 375
    documents of the report, failed at attempt 3 of 3 in ten seconds). Here the task that
    meets the broken pool raises WorkerFault, and the next one runs on a new pool."""
    signals = tmp_path / "signals"
    signals.mkdir()
    (signals / "open").touch()
    parse_pool = ParsePool(ParseLimits(processes=1, timeout_seconds=60, memory_bytes=2**30, tasks_per_child=100))
    parse_pool.target = gated_process
    lost = threading.Event()

    def parse(name: str, content: bytes) -> object:
        return parse_pool.process(lost, content, name, 1_000_000, ChunkingOptions(), None, embed_here=True)

    try:
        parse("gate-idle.txt", str(signals).encode())
        idle = int((signals / "gate-idle.txt.pid").read_text())  # its task returned: the child is idle
        os.kill(idle, signal.SIGKILL)
        with pytest.raises(WorkerFault, match="parsing processes"):
            parse("doc.txt", b"plain words")
        assert parse_pool.cooldown_remaining() > 0  # the worker holds off claiming
        assert parse("doc.txt", b"plain words again").encoded is not None  # a new pool
    finally:
        parse_pool.close()
