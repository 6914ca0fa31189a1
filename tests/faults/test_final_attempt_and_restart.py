"""The two faults the chaos applies at random, each forced once, step by step:

- a worker SIGKILLed while it builds a job on its final attempt (max_attempts=1): no claim
  can take the job again, and with no janitor at all the next worker's claim loop
  dead-letters it (its expire_stale before its first claim); the document ends `failed`,
  the batch terminal, the checker clean;
- the database server restarted under workers whose pools hold only idle connections
  (the machine's server, which the harness must not restart, has every backend of the
  database terminated instead): every connection they hold is dead, and documents
  enqueued afterwards with a single attempt each all complete (no claim or job was
  handed a dead connection) and no worker exits."""

import random
import time

from ingestion_pipeline.db.connection import connect
from tests.faults.checker import check
from tests.faults.harness import (
    ChaosStats,
    ServerControl,
    WorkerFleet,
    final_attempt_kill,
    final_attempt_outcomes,
    open_jobs,
    seed_documents,
    server_restart,
)
from tests.faults.rpc_log import read_history


def wait_for(condition, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def one(url: str, sql: str, params=()):
    with connect(url) as conn:
        return conn.execute(sql, params).fetchone()


def test_a_worker_killed_on_the_final_attempt_leaves_a_dead_lettered_job(db_url, tmp_path):
    seed_documents(db_url, 1, 1, max_attempts=1)
    fleet = WorkerFleet(db_url, tmp_path, 1)
    stats = ChaosStats()
    try:
        holder = fleet.start(slow_seconds=60)  # holds the build: provably mid-job
        wait_for(fleet.history(holder).with_suffix(".embedding").exists, "the worker to be mid-build")
        assert final_attempt_kill(db_url, fleet, stats, random.Random(1), [holder])
        assert stats.final_attempt_kills == 1 and fleet.processes[holder].returncode == -9
        job = one(db_url, "select id, status, attempt_count, max_attempts, lease_expires_at from ingestion_jobs")
        assert (job["status"], job["attempt_count"], job["max_attempts"]) == ("processing", 1, 1)
        assert stats.final_attempt_jobs == [str(job["id"])]
        # The replacement started by the kill claimed nothing (no attempt left) and expired
        # nothing yet (the lease was live). Once the lease is past its deadline, a new
        # worker's first claim dead-letters the job: no janitor runs in this test.
        fleet.stop_all()
        wait_for(
            lambda: one(db_url, "select lease_expires_at < now() as past from ingestion_jobs")["past"],
            "the dead worker's lease to expire",
            timeout=10,
        )
        sweeper = fleet.start()
        # A wait, not a measure: the sweeper's own history (below) says its claim loop did it.
        wait_for(
            lambda: one(db_url, "select status from ingestion_jobs")["status"] == "failed",
            "the claim loop to dead-letter the job",
            timeout=60,
        )
    finally:
        fleet.stop_all()

    assert final_attempt_outcomes(db_url, stats.final_attempt_jobs) == {("failed", "dead_letter"): 1}
    expiries = [e for e in read_history([fleet.history(sweeper)]) if e["call"] == "expire_stale" and e["ok"]]
    assert any(str(job["id"]) in map(str, e.get("job_ids") or []) for e in expiries), expiries
    document = one(db_url, "select status from documents")
    batch = one(db_url, "select status, total_files, completed_files, failed_files from import_batches")
    assert document["status"] == "failed"
    assert dict(batch) == {"status": "completed_with_errors", "total_files": 1, "completed_files": 0, "failed_files": 1}
    report = check(db_url, fleet.histories())
    assert report.violations == [], report.summary()
    assert report.stats["jobs"] == {"failed": 1}, report.summary()


def test_workers_ride_out_a_server_restart_with_only_idle_pooled_connections(db_url, pg_server, tmp_path):
    fleet = WorkerFleet(db_url, tmp_path, 2)
    stats = ChaosStats()
    server = ServerControl.for_url(db_url)
    assert server.restarts == (pg_server.name == "embedded")
    documents = 60

    def backends() -> int:
        return one(db_url, "select count(*) as n from pg_stat_activity where application_name like %s", ("fault-w%",))[
            "n"
        ]

    try:
        labels = [fleet.start(), fleet.start()]
        # Until the restart (or the termination of every backend) met both workers' pooled
        # connections: a pool may hold none for a moment (a connection it replaced), and a
        # termination that met no connection of theirs tests nothing.
        while True:
            wait_for(lambda: backends() >= len(labels), "both workers' pools to hold a connection")
            time.sleep(0.5)  # polling an empty queue: their pooled connections idle, most likely
            server_restart(server, stats)
            if server.restarts or stats.backends_terminated_all >= len(labels):
                break
        assert stats.server_restarts == 1 or stats.all_backends_terminated >= 1, stats.summary()
        wait_for(lambda: fleet.alive() == labels or None, "the fleet")  # nobody died of it
        # A single attempt each: a job handed a dead connection would fail for good.
        seed_documents(db_url, documents, 2, max_attempts=1, run_tag="after-restart-")
        wait_for(lambda: not open_jobs(db_url), "the fleet to drain after the restart", timeout=60)
        assert fleet.alive() == labels, [(label, p.returncode) for label, p in fleet.processes.items()]
    finally:
        fleet.stop_all()

    report = check(db_url, fleet.histories())
    assert report.violations == [], report.summary()
    assert report.stats["jobs"] == {"completed": documents}, report.summary()
    assert report.stats["documents"] == {"indexed": documents}, report.summary()
    errors = "".join((tmp_path / f"{label}.err").read_text() for label in labels)
    assert "Traceback" not in errors, errors
