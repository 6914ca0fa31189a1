"""The worker's bulk acknowledgement and its one heartbeat thread, on a real database."""

from __future__ import annotations

import threading

import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Outcome, Worker
from ingestion_pipeline.worker.acks import AckBuffer
from ingestion_pipeline.worker.errors import LeaseLost
from ingestion_pipeline.worker.indexing import no_op
from ingestion_pipeline.worker.job import Built
from tests.helpers import batch, seed_batch, seed_job

# The setting's maximum.
LONG_ACK_DELAY = 5.0
# Past the setting's bound (set without its validation), for the tests that must see every
# statement go out because all jobs in flight were waiting: no no-op job of a loaded machine
# comes near it, so a statement the delay decided (delay_flushes) is the defect, not the load.
NEVER_DUE = 60.0


@pytest.fixture
def delay_flushes(monkeypatch) -> list[int]:
    """The size of each acknowledgement statement that went out only because its oldest item's
    delay ran out (not because every job in flight was waiting, nor because it was full)."""
    due: list[int] = []
    ready = AckBuffer._ready

    def recording(self) -> bool:
        answer = ready(self)
        waiting, full = len(self._pending) >= self._in_flight - self._sending, len(self._pending) >= self._max_items
        if answer and not (waiting or full):
            due.append(len(self._pending))
        return answer

    monkeypatch.setattr(AckBuffer, "_ready", recording)
    return due


class CountingRpc(IngestionRpc):
    """Records the bulk calls the worker makes (and fails the test on single-job ones)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()
        self.completions: list[int] = []  # items per complete_many call
        self.beats: list[int] = []  # leases per heartbeat_many call
        self.single_calls: list[str] = []

    def complete_many(self, worker_id, items):
        with self.lock:
            self.completions.append(len(items))
        return super().complete_many(worker_id, items)

    def heartbeat_many(self, worker_id, leases):
        with self.lock:
            self.beats.append(len(leases))
        return super().heartbeat_many(worker_id, leases)

    def complete(self, *args, **kwargs):
        self.single_calls.append("complete")
        return super().complete(*args, **kwargs)

    def heartbeat(self, *args, **kwargs):
        self.single_calls.append("heartbeat")
        return super().heartbeat(*args, **kwargs)


def worker_settings(db_url: str, **overrides):
    values = {
        "worker_concurrency": 10,
        "claim_batch_size": 10,
        "pool_max_size": 14,
        "ack_delay_seconds": LONG_ACK_DELAY,
        "retry_backoff_seconds": 0,
        **overrides,
    }
    return load_settings(database_url=db_url, **values)


def test_jobs_that_finish_together_are_acknowledged_in_one_statement(db_url, conn, delay_flushes):
    batch_id = seed_batch(conn)
    for _ in range(40):
        seed_job(conn, batch_id)
    settings = worker_settings(db_url).model_copy(update={"ack_delay_seconds": NEVER_DUE})
    with make_pool(db_url, settings) as pool:
        rpc = CountingRpc(pool, stale_after_seconds=settings.stale_after_seconds)
        report = Worker(pool, settings, rpc=rpc, processor=no_op).run(drain=True)

    assert report.counts["completed"] == 40
    # A claim's jobs finish together and go out in one statement (the loop may claim the
    # next ones in smaller groups, as slots free up: those go out together too).
    assert sum(rpc.completions) == 40 and rpc.completions[0] == 10 and len(rpc.completions) < 20
    assert rpc.single_calls == []
    assert delay_flushes == []  # sent when all were waiting: no statement waited for the delay
    final = batch(conn, batch_id)
    assert (final["status"], final["completed_files"], final["open_files"]) == ("completed", 40, 0)


def test_a_job_that_ends_without_acknowledging_does_not_hold_the_others(db_url, conn, delay_flushes):
    """One job of the claim loses its lease (no acknowledgement): the other nine must not
    wait for it until the delay runs out."""
    for _ in range(10):
        seed_job(conn)
    settings = worker_settings(db_url).model_copy(update={"ack_delay_seconds": NEVER_DUE})
    lost = []

    def lose_the_first(run) -> Built:
        if not lost:
            lost.append(run.job.job_id)
            run.lease.lost.set()
            run.lease.check()
        return Built()

    with make_pool(db_url, settings) as pool:
        rpc = CountingRpc(pool, stale_after_seconds=settings.stale_after_seconds)
        report = Worker(pool, settings, rpc=rpc, processor=lose_the_first).run(drain=True)

    assert (report.counts["completed"], report.counts["lease_lost"]) == (9, 1)
    assert rpc.completions == [9]
    assert delay_flushes == []


def test_one_heartbeat_statement_renews_every_lease_of_the_worker(db_url, conn):
    for _ in range(4):
        seed_job(conn)
    settings = worker_settings(
        db_url,
        worker_concurrency=4,
        claim_batch_size=4,
        pool_max_size=8,
        heartbeat_interval_seconds=0.05,
        ack_delay_seconds=0.01,
    )
    renewed_twice = threading.Event()
    started = threading.Barrier(4)

    class Watching(CountingRpc):
        def heartbeat_many(self, worker_id, leases):
            answer = super().heartbeat_many(worker_id, leases)
            if sum(1 for n in self.beats if n == 4) >= 2:
                renewed_twice.set()
            return answer

    def hold_until_renewed(run) -> Built:
        started.wait(10)
        assert renewed_twice.wait(10)
        return Built()

    with make_pool(db_url, settings) as pool:
        rpc = Watching(pool, stale_after_seconds=settings.stale_after_seconds)
        report = Worker(pool, settings, rpc=rpc, processor=hold_until_renewed).run(drain=True)

    assert report.counts["completed"] == 4
    assert max(rpc.beats) == 4 and "heartbeat" not in rpc.single_calls


def test_a_heartbeat_that_finds_a_lease_lost_stops_only_that_job(db_url, conn):
    """Two jobs in flight; one is taken over by another worker. The next heartbeat
    statement reports it lost: that job stops, the other completes."""
    _, taken_job = seed_job(conn)
    seed_job(conn)
    settings = worker_settings(
        db_url,
        worker_concurrency=2,
        claim_batch_size=2,
        pool_max_size=6,
        heartbeat_interval_seconds=0.05,
        ack_delay_seconds=0.01,
    )
    both_started = threading.Barrier(2)

    def wait_for_takeover(run) -> Built:
        both_started.wait(10)
        if run.job.job_id == taken_job:
            if not run.lease.lost.is_set():
                conn.execute("update ingestion_jobs set lease_token = lease_token + 1 where id = %s", (taken_job,))
            assert run.lease.lost.wait(10)
            raise LeaseLost("taken over")
        return Built()

    with make_pool(db_url, settings) as pool:
        report = Worker(pool, settings, processor=wait_for_takeover).run(drain=True)

    outcomes = {r.job_id: r.outcome for r in report.results}
    assert outcomes[taken_job] == Outcome.LEASE_LOST
    assert sorted(o.value for o in outcomes.values()) == ["completed", "lease_lost"]
