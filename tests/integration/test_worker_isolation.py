"""Parsing in the worker's child processes: limits that fire, other jobs that go on, and
no child left behind (worker/isolation.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.settings import Settings
from ingestion_pipeline.worker import Worker
from tests.fixtures.hostile import hostile_process, write_hostile_corpus

ROOT = Path(__file__).resolve().parents[2]
INGEST = Path(sys.executable).parent / "ingest"
WORKER_RSS_BOUND = 1024 * 2**20  # the worker's own peak, children excluded


def write_corpus(folder: Path, normal: int, hostile: tuple[str, ...] = (), repeat: int = 60) -> Path:
    folder.mkdir()
    for number in range(normal):
        (folder / f"doc-{number:02d}.md").write_text(
            f"# Document {number}\n\n" + f"Lanterns and harbours, paragraph {number}. " * repeat
        )
    for name in hostile:
        (folder / name).write_text(f"{name}: a document its parser cannot handle")
    return folder


def jobs_by_source(conn) -> dict[str, dict]:
    rows = conn.execute(
        "select d.source_name, j.status, j.error_message from ingestion_jobs j join documents d on d.id = j.document_id"
    ).fetchall()
    return {row["source_name"]: row for row in rows}


class PeakRss:
    """The peak resident set of this process (the worker), sampled while it drains."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, me.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.one_server  # processes under limits: the client's subject, run once
def test_hanging_allocating_and_crashing_parsers_fail_alone_within_their_limits(db_url, conn, tmp_path):
    folder = write_corpus(tmp_path / "corpus", 20, ("hang.txt", "allocate.txt", "crash.txt"))
    settings = Settings(
        database_url=db_url, parse_timeout_seconds=3, parse_memory_mb=512, worker_concurrency=4, pool_max_size=8
    )
    with make_pool(db_url, settings) as pool:
        enqueue_paths(pool, [folder], max_bytes=1_000_000)
        worker = Worker(pool, settings, parse_processes=2, parse_target=hostile_process)
        started = time.monotonic()
        with PeakRss() as rss:
            report = worker.run(drain=True)
        seconds = time.monotonic() - started

    jobs = jobs_by_source(conn)
    print(
        f"\nworker peak RSS {rss.peak / 2**20:.0f} MiB (bound {WORKER_RSS_BOUND / 2**20:.0f} MiB); "
        f"{report.claimed} jobs in {seconds:.1f} s"
    )
    # crash.txt kills its child at every parse: a worker fault as far as one death can tell,
    # released with its attempt refunded 3 times (max_attempts), then charged 3 times.
    assert report.claimed == 28 and report.counts["completed"] == 20
    assert report.counts["released"] == 3
    assert all(jobs[f"doc-{n:02d}.md"]["status"] == "completed" for n in range(20))
    assert (jobs["hang.txt"]["status"], jobs["hang.txt"]["error_message"]) == ("failed", "parsing took longer than 3 s")
    assert (jobs["allocate.txt"]["status"], jobs["allocate.txt"]["error_message"]) == (
        "failed",
        "parsing needed more than 512 MiB of memory",
    )
    assert jobs["crash.txt"]["status"] == "failed"
    assert jobs["crash.txt"]["error_message"].startswith("the process parsing the document died (killed by SIGKILL)")
    assert not [name for name, job in jobs.items() if job["status"] in ("pending", "processing")]
    assert rss.peak < WORKER_RSS_BOUND
    assert seconds < 60  # generous: the hang costs 3 s, not forever


def test_in_thread_parsing_remains_for_comparison(db_url, conn, tmp_path):
    folder = write_corpus(tmp_path / "corpus", 3)
    settings = Settings(database_url=db_url, parse_processes=0)
    with make_pool(db_url, settings) as pool:
        enqueue_paths(pool, [folder], max_bytes=1_000_000)
        worker = Worker(pool, settings)
        assert worker.parse_pool is None
        report = worker.run(drain=True)
    assert report.counts["completed"] == 3
    stages = {row["stage"] for row in conn.execute("select stage from ingestion_job_stages").fetchall()}
    assert {"load", "parse", "chunk", "embed", "write", "commit"} <= stages


def family_of(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def wait_until(what: str, probe, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
@pytest.mark.one_server  # processes and signals: the client's subject, run once
def test_no_parsing_child_outlives_the_worker(stop_signal, db_url, conn, tmp_path):
    """`ingest work` (children = cores) is stopped while it parses: Ctrl-C and SIGTERM let the
    jobs in flight finish and stop the children; SIGKILL leaves the jobs to their leases, and
    the children die with it all the same."""
    folder = write_corpus(tmp_path / "corpus", 120, repeat=2000)  # seconds of parsing
    with make_pool(db_url, Settings(database_url=db_url)) as pool:
        enqueue_paths(pool, [folder], max_bytes=10_000_000)
    env = {**os.environ, "DATABASE_URL": db_url, "INGEST_PARSE_PROCESSES": "2"}
    proc = subprocess.Popen(
        [str(INGEST), "work"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        children = wait_until("parsing children", lambda: len(family_of(proc.pid)) >= 3 and family_of(proc.pid))
        wait_until(
            "a completed job",
            lambda: (
                conn.execute("select count(*) as n from ingestion_jobs where status = 'completed'").fetchone()["n"] > 0
            ),
        )
        proc.send_signal(stop_signal)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_until("every parsing child to exit", lambda: alive(children) == [], timeout=30)
    if stop_signal != signal.SIGKILL:
        assert proc.returncode == 0, proc.stderr.read()
        processing = conn.execute("select count(*) as n from ingestion_jobs where status = 'processing'").fetchone()
        assert processing["n"] == 0  # the jobs in flight finished


@pytest.mark.one_server  # processes under limits: the client's subject, run once
def test_a_hostile_corpus_ends_within_the_limits_beside_normal_documents(db_url, conn, tmp_path):
    """The real parsers on documents built to hurt them: each ends `failed` with a message
    or `indexed`, within the limits, and the normal documents of the batch index."""
    folder = write_corpus(tmp_path / "corpus", 5)
    hostile = write_hostile_corpus(folder)
    settings = Settings(database_url=db_url, parse_timeout_seconds=10, parse_memory_mb=1024, max_attempts=1)
    with make_pool(db_url, settings) as pool:
        enqueue_paths(pool, [folder], max_bytes=50 * 2**20, max_attempts=1)
        started = time.monotonic()
        with PeakRss() as rss:
            Worker(pool, settings, parse_processes=2).run(drain=True)
        seconds = time.monotonic() - started

    jobs = jobs_by_source(conn)
    print(f"\nworker peak RSS {rss.peak / 2**20:.0f} MiB; {len(jobs)} jobs in {seconds:.1f} s")
    for name in hostile:
        print(f"  {name}: {jobs[name]['status']} {jobs[name]['error_message'] or ''}")
    assert all(jobs[f"doc-{n:02d}.md"]["status"] == "completed" for n in range(5))
    for name in hostile:
        assert jobs[name]["status"] in ("completed", "failed"), (name, jobs[name])
        assert jobs[name]["status"] == "completed" or jobs[name]["error_message"], (name, jobs[name])
    assert rss.peak < WORKER_RSS_BOUND
