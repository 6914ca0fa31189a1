"""Worker and operations hardening: bounded report, stop during the claim back-off,
stale final attempts, post-commit bookkeeping, heartbeat after completion, exit codes."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from datetime import datetime, timedelta

import psycopg
import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.models import RpcResult
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.health import queue_checks
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Outcome, Worker
from ingestion_pipeline.worker.indexing import no_op
from tests.helpers import (
    batch,
    document,
    index_document,
    job,
    make_lease_stale,
    seed_batch,
    seed_document,
    seed_job,
    start_reindex_build,
)


class FailingClaims(IngestionRpc):
    """The database is away for the first `failures` claims."""

    def __init__(self, *args, failures: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.failures = failures
        self.claims_tried = 0
        self.claimed = 0

    def claim(self, worker_id, limit=1, stale_after_seconds=None):
        self.claims_tried += 1
        if self.claims_tried <= self.failures:
            raise psycopg.OperationalError("connection refused (test)")
        jobs = super().claim(worker_id, limit, stale_after_seconds)
        self.claimed += len(jobs)
        return jobs


class StopDuringWait(threading.Event):
    """A stop event on which the request arrives while the loop waits (the back-off)."""

    def wait(self, timeout=None):
        self.set()
        return True


def test_report_keeps_counters_and_a_bounded_window_of_results(pool, settings, conn):
    batch_id = seed_batch(conn)
    for _ in range(12):
        seed_job(conn, batch_id)
    report = Worker(pool, settings, keep_results=3).run(drain=True)
    assert report.claimed == 12 and report.counts["completed"] == 12
    assert isinstance(report.results, deque) and report.results.maxlen == 3 and len(report.results) == 3
    assert report.as_dict()["claimed"] == 12 and report.as_dict()["completed"] == 12


def test_stop_requested_during_the_claim_back_off_claims_nothing(pool, settings, conn):
    batch_id = seed_batch(conn)
    for _ in range(3):
        seed_job(conn, batch_id)
    rpc = FailingClaims(pool, stale_after_seconds=settings.stale_after_seconds, failures=1)
    stop = StopDuringWait()
    report = Worker(pool, settings, rpc=rpc).run(drain=False, stop=stop)
    assert stop.is_set()
    assert rpc.claimed == 0 and report.claimed == 0
    assert conn.execute("select count(*) as n from ingestion_jobs where status = 'pending'").fetchone()["n"] == 3


def test_the_time_budget_ends_claiming_and_lets_the_jobs_in_flight_finish(pool, settings, conn):
    """What a Dagster drain run relies on to end: past `max_seconds` nothing more is
    claimed, the job in flight completes, the rest stays pending for the next run."""
    budget = 0.2
    batch_id = seed_batch(conn)
    for _ in range(5):
        seed_job(conn, batch_id)

    def outlast_the_budget(run):
        time.sleep(budget * 2)  # the job in flight is still working when the budget runs out
        return no_op(run)

    report = Worker(pool, settings, concurrency=1, processor=outlast_the_budget).run(drain=True, max_seconds=budget)
    assert report.claimed == 1 and report.counts["completed"] == 1
    counts = {
        row["status"]: row["n"]
        for row in conn.execute("select status, count(*) as n from ingestion_jobs group by status").fetchall()
    }
    assert counts == {"completed": 1, "pending": 4}


def crashed_on_final_attempt(conn) -> tuple:
    """A job with max_attempts=1 whose worker died (SIGKILL, OOM, a second Ctrl-C) after
    claiming it: its lease is past its deadline and no attempt is left."""
    batch_id = seed_batch(conn)
    _, job_id = seed_job(conn, batch_id, max_attempts=1)
    [claimed] = IngestionRpc(conn).claim("killed-worker")
    assert claimed.job_id == job_id
    make_lease_stale(conn, job_id)
    return batch_id, job_id


def test_work_drain_dead_letters_a_job_that_died_on_its_final_attempt(db_url, conn, capsys):
    batch_id, job_id = crashed_on_final_attempt(conn)
    assert ingest(["work", "--drain", "--json", "--database-url", db_url]) == 0
    stored = job(conn, job_id)
    assert (stored["status"], stored["stage"]) == ("failed", "dead_letter")
    assert batch(conn, batch_id)["status"] == "completed_with_errors"
    assert all(check.passed for check in queue_checks(IngestionRpc(conn).queue_health(), 3600))


def test_janitor_command_runs_the_janitor_passes_without_dagster(db_url, conn, capsys):
    rpc = IngestionRpc(conn)
    batch_id, dead_job = crashed_on_final_attempt(conn)
    seed_job(conn)
    document_id, _ = index_document(rpc, conn)
    reindex, generation = start_reindex_build(rpc, conn, document_id, "worker")
    rpc.fail_or_retry(reindex.job_id, document_id, worker_id="worker", error_message="crash")
    health = rpc.queue_health()
    assert health.stale_leases == 1 and any(
        "ingest janitor" in c.message for c in queue_checks(health, 3600) if not c.passed
    )

    capsys.readouterr()
    assert ingest(["janitor", "--json", "--database-url", db_url]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["expired"] == 1 and done["expired_job_ids"] == [str(dead_job)]
    assert done["cleanup"]["generations"] == 1 and done["cleanup"]["passes"] == 1
    assert job(conn, dead_job)["status"] == "failed"
    assert batch(conn, batch_id)["status"] == "completed_with_errors"
    assert (
        conn.execute(
            "select count(*) as n from document_chunks where index_generation_id = %s", (generation,)
        ).fetchone()["n"]
        == 0
    )
    assert ingest(["janitor", "--database-url", db_url]) == 0
    assert "expired stale final attempts" in capsys.readouterr().out


class TransientBegin(IngestionRpc):
    """The first generation begun hits a dropped connection."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.failed_once = False

    def begin_generation(self, *args, **kwargs):
        if not self.failed_once:
            self.failed_once = True
            raise psycopg.OperationalError("server closed the connection unexpectedly (test)")
        return super().begin_generation(*args, **kwargs)


class SkewedClock(datetime):
    """The worker machine's clock runs an hour behind the database server's."""

    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz) - timedelta(hours=1)


def test_a_retry_backs_off_on_the_servers_clock_whatever_the_workers_clock(db_url, pool, conn, monkeypatch):
    import ingestion_pipeline.db.rpc.acks as rpc_module
    import ingestion_pipeline.worker.job as job_module

    monkeypatch.setattr(job_module, "datetime", SkewedClock)
    monkeypatch.setattr(rpc_module, "datetime", SkewedClock)
    settings = load_settings(database_url=db_url, retry_backoff_seconds=60)
    _, job_id = seed_job(conn, max_attempts=3)
    rpc = TransientBegin(pool, stale_after_seconds=settings.stale_after_seconds)

    report = Worker(pool, settings, rpc=rpc).run(drain=True)

    assert report.counts["retried"] == 1 and report.claimed == 1  # not claimed again at once
    stored = conn.execute(
        "select status, stage, extract(epoch from next_run_at - now()) as wait from ingestion_jobs where id = %s",
        (job_id,),
    ).fetchone()
    assert (stored["status"], stored["stage"]) == ("pending", "retry_wait")
    assert 25 <= stored["wait"] <= 60  # half to full of the 60 s backoff, from the server's now()


class HeartbeatAfterCompletion(IngestionRpc):
    """Forces the race with barriers: the first heartbeat statement that holds the job's
    lease (its leases read while the job was in flight) is sent only once the job was
    completed; the build waits (begin_generation) until that heartbeat holds its lease. So
    the interleaving is the same however slow the machine (a 10 ms heartbeat once missed a
    build under load: CI rehearsal, 2026-12-03). A barrier that is never reached fails the
    test (`broken`) instead of letting the run go on in another order; the database's answer
    to the late heartbeat is kept (`late_answer`): it must report the lease lost."""

    BARRIER_BOUND = 60.0  # only so that a broken run fails instead of hanging

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.leases_read = threading.Event()
        self.completed = threading.Event()
        self.late_answer = None
        self.broken: list[str] = []

    def heartbeat_many(self, worker_id, leases):
        if not leases or self.leases_read.is_set():
            return super().heartbeat_many(worker_id, leases)
        self.leases_read.set()
        if not self.completed.wait(self.BARRIER_BOUND):
            self.broken.append("the completion never came")
        self.late_answer = super().heartbeat_many(worker_id, leases)
        return self.late_answer

    def begin_generation(self, *args, **kwargs):
        if not self.leases_read.wait(self.BARRIER_BOUND):
            self.broken.append("no heartbeat held the lease")
        return super().begin_generation(*args, **kwargs)

    def complete_many(self, *args, **kwargs):
        result = super().complete_many(*args, **kwargs)
        self.completed.set()
        return result


def test_a_heartbeat_that_races_the_completion_raises_no_alarm(db_url, pool, conn, caplog):
    """The lease is released before the acknowledgement; a heartbeat already on its way
    with it is answered `lost` for a job that is done, which is not an alarm."""
    settings = load_settings(database_url=db_url, retry_backoff_seconds=0, heartbeat_interval_seconds=0.01)
    _, job_id = seed_job(conn)
    rpc = HeartbeatAfterCompletion(pool, stale_after_seconds=settings.stale_after_seconds)
    caplog.set_level(logging.INFO)

    report = Worker(pool, settings, rpc=rpc).run(drain=True)

    # The race happened: the heartbeat went out after the completion, and the database
    # answered that lease lost (the job was done).
    assert rpc.broken == []
    assert rpc.late_answer is not None and [ref.job_id for ref in rpc.late_answer.lost] == [job_id]
    assert report.counts["completed"] == 1
    assert not [r for r in caplog.records if "lease lost" in r.getMessage()]
    assert job(conn, job_id)["status"] == "completed"


class PostCommitTrouble(IngestionRpc):
    """Trouble after the commit went through: the commit stage's log write raises or is
    refused, or the commit's own answer is lost with the connection."""

    def __init__(self, *args, trouble: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.trouble = trouble

    @property
    def stages_ride_acks(self) -> bool:
        """The log troubles need the commit stage's row to be a call of its own, as it is on
        schemas before stage rows rode the acknowledgement (migration 20261201000500)."""
        return self.trouble == "answer_lost" and super().stages_ride_acks

    def record_stage(self, job_id, worker_id, stage, **kwargs):
        if stage == "commit" and self.trouble == "log_raises":
            raise psycopg.OperationalError("server closed the connection unexpectedly (test)")
        if stage == "commit" and self.trouble == "log_refused":
            return RpcResult(ok=False, reason="lease_lost")
        return super().record_stage(job_id, worker_id, stage, **kwargs)

    def complete_many(self, *args, **kwargs):
        result = super().complete_many(*args, **kwargs)
        if self.trouble == "answer_lost":
            raise psycopg.OperationalError("server closed the connection unexpectedly (test)")
        return result


@pytest.mark.parametrize("trouble", ["log_raises", "log_refused", "answer_lost"])
def test_post_commit_bookkeeping_never_fails_or_rebuilds_a_finished_build(trouble, pool, settings, conn):
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id, max_attempts=3)
    rpc = PostCommitTrouble(pool, stale_after_seconds=settings.stale_after_seconds, trouble=trouble)

    report = Worker(pool, settings, rpc=rpc).run(drain=True)

    assert report.claimed == 1  # built once, never claimed again
    expected = Outcome.LEASE_LOST if trouble == "answer_lost" else Outcome.COMPLETED  # the answer never came
    assert [r.outcome for r in report.results] == [expected]
    stored = job(conn, job_id)
    assert (stored["status"], stored["stage"], stored["attempt_count"]) == ("completed", "indexed", 1)
    assert document(conn, document_id)["status"] == "indexed"
    assert batch(conn, batch_id)["status"] == "completed"
    generations = conn.execute(
        "select status, count(*) as n from index_generations where document_id = %s group by status", (document_id,)
    ).fetchall()
    assert [(g["status"], g["n"]) for g in generations] == [("committed", 1)]


def test_work_exits_1_when_a_job_was_abandoned_and_0_when_documents_failed(db_url, conn, monkeypatch, capsys):
    seed_job(conn)  # fine
    document_id = seed_document(conn, content=b"\x89PNG\r\n\x1a\n one")  # fails for good: a document problem
    assert IngestionRpc(conn).enqueue(document_id, max_attempts=1).ok
    assert ingest(["work", "--drain", "--json", "--database-url", db_url]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["completed"], summary["failed"]) == (1, 1)

    seed_document_id = seed_document(conn, content=b"\x89PNG\r\n\x1a\n two")
    assert IngestionRpc(conn).enqueue(seed_document_id).ok

    def database_gone(self, *args, **kwargs):
        raise psycopg.OperationalError("server closed the connection unexpectedly (test)")

    monkeypatch.setattr(IngestionRpc, "fail_or_retry_many", database_gone)
    assert ingest(["work", "--drain", "--json", "--database-url", db_url]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["abandoned"] == 1
    assert "1 job(s) abandoned" in captured.err
