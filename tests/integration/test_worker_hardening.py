"""Worker and operations hardening: bounded report, stop during the claim back-off,
stale final attempts, post-commit bookkeeping, heartbeat after completion, exit codes."""

from __future__ import annotations

import threading
from collections import deque

import psycopg

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.worker import Outcome, Worker
from tests.helpers import seed_batch, seed_job


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
