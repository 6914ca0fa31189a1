"""A drain run killed mid-way (SIGKILL: out of memory, a node lost) loses nothing, and one
interrupted mid-way (terminated from the UI) finishes its jobs in flight.

The run is a real Dagster run worker (`dagster job execute`, the job's in-process executor,
as the code server launches it). It is stopped at a forced point: batch A drains freely,
batch B's row is locked by the test, so the run's first acknowledgement that moves B's
counters blocks in the database with B's first jobs built and in flight. The run's
process group is then killed, and its blocked backend ends the way a server ends a dead
client's session. Once the dead run's leases have expired (their deadlines set in the
past, as after INGEST_STALE_AFTER_SECONDS), the next drain run reclaims its jobs under
new tokens and the janitor clears what the dead run built: every document indexed once,
both batches complete, every check passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.health import DESCRIPTIONS
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.jobs import janitor
from tests.helpers import batch, make_lease_stale
from tests.orchestration.in_process import check_results, resolved_job
from tests.orchestration.live_dagster import clean_env

# Worker processes under faults: the client's and the workers' behaviour, run once (conftest.py).
pytestmark = pytest.mark.one_server

DAGSTER = Path(sys.executable).parent / "dagster"
RUN_APPLICATION_NAME = "ingest"  # the drain run's pool (db/ready.py: migrated_pool)


def write_documents(folder: Path, prefix: str, count: int) -> Path:
    folder.mkdir()
    for number in range(count):
        (folder / f"{prefix}-{number}.md").write_text(
            f"# {prefix} document {number}\n\n" + f"Paragraph about lighthouse {prefix}{number}. " * 40
        )
    return folder


def status_counts(conn: psycopg.Connection) -> dict[str, int]:
    rows = conn.execute("select status, count(*) as n from ingestion_jobs group by status").fetchall()
    return {row["status"]: row["n"] for row in rows}


def run_backends(observer: psycopg.Connection) -> list[dict]:
    return observer.execute(
        "select pid, pg_blocking_pids(pid) as blockers from pg_stat_activity "
        "where application_name = %s and datname = current_database()",
        (RUN_APPLICATION_NAME,),
    ).fetchall()


def wait_for(what: str, probe, proc: subprocess.Popen, log: Path, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        assert proc.poll() is None, f"the drain run exited before {what}: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {log.read_text()[-3000:]}"
        time.sleep(0.05)
    return value


class BlockedRun:
    """Batches A (4 documents) and B (6), B's row locked by a transaction of the test, and a
    real run worker draining them with 2 jobs in flight: A drains, and the run's first
    acknowledgement that moves B's counters blocks in the database, B's first jobs built
    and waiting for it. Dagster's storage is `dagster_url`'s database (the run worker loads
    the checkout's dagster.yaml: without DAGSTER_PG_URL it would make a `dagster` database on
    the pipeline's server and leave it there)."""

    def __init__(self, db_url: str, pool, conn: psycopg.Connection, tmp_path: Path, dagster_url: str):
        self.first = enqueue_paths(pool, [write_documents(tmp_path / "a", "alpha", 4)], max_bytes=1_000_000)
        self.second = enqueue_paths(pool, [write_documents(tmp_path / "b", "beta", 6)], max_bytes=1_000_000)
        self.blocker = psycopg.connect(db_url)
        self.blocker.execute("select id from import_batches where id = %s for update", (self.second.batch_id,))
        self.log = tmp_path / "drain-run.log"
        env = clean_env(
            tmp_path / "data", DATABASE_URL=db_url, DAGSTER_PG_URL=dagster_url, INGEST_WORKER_CONCURRENCY="2"
        )
        self.proc = subprocess.Popen(
            [str(DAGSTER), "job", "execute", "-m", "ingestion_pipeline.definitions", "-j", "ingest_documents"],
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        blocker_pid = self.blocker.info.backend_pid
        try:
            wait_for(
                "an acknowledgement blocked on batch B",
                lambda: [row for row in run_backends(conn) if blocker_pid in row["blockers"]],
                self.proc,
                self.log,
            )
        except BaseException:
            self.kill()
            self.release()
            raise

    def release(self) -> None:
        self.blocker.rollback()
        self.blocker.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def test_a_drain_run_killed_mid_way_loses_nothing(db_url, empty_db_url, pool, conn, instance, resources, tmp_path):
    run = BlockedRun(db_url, pool, conn, tmp_path, empty_db_url)
    run.kill()
    first, second = run.first, run.second
    # The server ends the dead client's sessions (keepalive, client_connection_check_interval);
    # the blocked acknowledgement rolls back with its session.
    for row in run_backends(conn):
        conn.execute("select pg_terminate_backend(%s)", (row["pid"],))
    run.release()
    wait_for_no_backends = time.monotonic() + 30
    while run_backends(conn) and time.monotonic() < wait_for_no_backends:
        time.sleep(0.05)

    # Mid-way: batch A done before B's first claim freed a slot, B's first jobs in flight, the rest waiting.
    at_kill = status_counts(conn)
    assert at_kill.get("completed", 0) >= 1 and at_kill.get("processing", 0) >= 1 and at_kill.get("pending", 0) >= 1
    orphaned = [
        row["id"] for row in conn.execute("select id from ingestion_jobs where status = 'processing'").fetchall()
    ]
    assert batch(conn, second.batch_id)["status"] != "completed"
    # What the dead run built for them is in the database, uncommitted, with its rows.
    dead_builds = conn.execute(
        """
        select g.status, (select count(*) from document_chunks c where c.index_generation_id = g.id) as chunks
          from index_generations g join ingestion_jobs j on j.document_id = g.document_id
         where j.id = any(%s)""",
        (orphaned,),
    ).fetchall()
    assert dead_builds and all(row["status"] == "building" and row["chunks"] > 0 for row in dead_builds), dead_builds

    for job_id in orphaned:  # the dead run's leases have run out
        make_lease_stale(conn, job_id)
    result = resolved_job("ingest_documents", resources).execute_in_process(instance=instance)
    assert result.success
    cleaned = janitor.execute_in_process(instance=instance, resources=resources)
    assert cleaned.success

    assert status_counts(conn) == {"completed": 10}
    for report, files in ((first, 4), (second, 6)):
        row = batch(conn, report.batch_id)
        assert (row["status"], row["completed_files"], row["failed_files"]) == ("completed", files, 0)
    attempts = {
        row["id"]: row["attempt_count"]
        for row in conn.execute("select id, attempt_count from ingestion_jobs").fetchall()
    }
    assert all(attempts[job_id] == 2 for job_id in orphaned)  # reclaimed once, under a new token
    # Each document: indexed, exactly one generation left (its committed one), every artifact row of it.
    documents = conn.execute("""
        select d.id, d.status, d.index_generation_id,
               (select array_agg(g.status) from index_generations g where g.document_id = d.id) as generations,
               (select count(*) from document_chunks c
                 where c.document_id = d.id and c.index_generation_id is distinct from d.index_generation_id) as stray
          from documents d""").fetchall()
    assert len(documents) == 10
    for document in documents:
        assert document["status"] == "indexed" and document["generations"] == ["committed"], document
        assert document["stray"] == 0, document
    checks = check_results(resolved_job("check_document_index", resources).execute_in_process(instance=instance))
    assert set(checks) == set(DESCRIPTIONS) and all(passed for passed, _ in checks.values()), checks


def test_a_drain_run_interrupted_mid_way_finishes_its_jobs_in_flight(db_url, empty_db_url, pool, conn, tmp_path):
    """Terminating a run from the UI interrupts its run worker (SIGINT, with the default run
    launcher): the drain claims nothing more, and the jobs in flight end as they would
    have, acknowledged, not left leased for a lease's lifetime."""
    run = BlockedRun(db_url, pool, conn, tmp_path, empty_db_url)
    try:
        in_flight = [
            row["id"] for row in conn.execute("select id from ingestion_jobs where status = 'processing'").fetchall()
        ]
        os.kill(run.proc.pid, signal.SIGINT)
        run.release()  # the blocked acknowledgement goes through
        assert run.proc.wait(60) != 0  # an interrupted run is not a success
    finally:
        run.kill()
    assert in_flight
    statuses = {row["id"]: row["status"] for row in conn.execute("select id, status from ingestion_jobs").fetchall()}
    assert all(statuses[job_id] == "completed" for job_id in in_flight)
    assert "processing" not in statuses.values()
    assert list(statuses.values()).count("pending") >= 1  # nothing claimed after the interrupt
