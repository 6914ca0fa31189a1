"""The faults a bounded fault run must show, forced (issue 45: no test asserts what timing
decides). Before the random chaos, each kind happens once, in this order, each by a barrier
or a condition read from the database, never by the clock:

- a stall (SIGUSR1; the worker is spared by the other faults until its `stall` entry is
  in its history: the stall is over);
- a final-attempt kill: a worker is asked to hold its next job on its final attempt
  (worker_process.Hold, kind `final`), and is SIGKILLed while the job's thread is held, so
  the job is `processing` under that claim when the worker dies;
- a server restart (or every backend of the database terminated);
- a delete of a document in flight: a worker holds a build (kind `any`, its lease left out
  of its heartbeats) while the operator deletes its document, then goes on, and its next
  write provably reaches the database and is refused;
- a bulk retry, once a failed job it may take exists;
- a cancel of a batch with open jobs;
- a new version of a document in flight (a held build, as for the delete), then the wait
  until a version above 1 committed.

Waits here are for conditions that must happen (a job of a kind claimed, a failure, a
commit) and are bounded only to fail loudly; the run does not assert how long they took."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path

from ingestion_pipeline.db.connection import connect
from tests.faults.rpc_log import read_history
from tests.faults.worker_process import write_whole

# A bound on each wait for a condition that must happen: reached, the run fails.
WAIT_BOUND_SECONDS = 180.0
_HOLD_IDS = count(1)


def wait_for(condition: Callable[[], object], what: str, bound: float = WAIT_BOUND_SECONDS) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"fault run: gave up waiting for {what} after {bound:.0f} s")
        time.sleep(0.05)


def finished_jobs(url: str) -> int:
    """Jobs that ended (completed, failed or cancelled): the run's progress."""
    with connect(url) as conn:
        return conn.execute(
            "select count(*) as n from ingestion_jobs where status in ('completed', 'failed', 'cancelled')"
        ).fetchone()["n"]


def stalls_recorded(history: Path) -> int:
    """The stalls a worker's history records (a stall is written when it is over)."""
    return sum(1 for entry in read_history([history]) if entry["call"] == "stall") if history.exists() else 0


class Held:
    """A build held in a worker's job thread (worker_process.Hold) until `go()`."""

    def __init__(self, fleet, label: str, kind: str):
        self.fleet, self.label = fleet, label
        hold_id = next(_HOLD_IDS)
        history = self.history = fleet.history(label)
        self.hold_id = hold_id
        self._go = history.with_suffix(f".go-{hold_id}")
        held = history.with_suffix(f".held-{hold_id}")
        write_whole(history.with_suffix(".hold"), f"{kind} {hold_id}\n")
        wait_for(held.exists, f"worker {label} to hold a build of kind {kind}")
        job_id, token = held.read_text().split()
        self.job_id = job_id
        self.token = None if token == "None" else int(token)
        with connect(fleet.url) as conn:
            self.document_id = conn.execute(
                "select document_id from ingestion_jobs where id = %s", (job_id,)
            ).fetchone()["document_id"]

    def go(self) -> None:
        self._go.write_text("go")

    def pin(self) -> bool:
        """Make the held lease outlast whatever the harness does next (an hour, renewals
        included: the job's lease_seconds), then partition it (the worker's heartbeats leave
        it out, so only a write tells the thread it lost the job). False when the lease had
        expired already (a heartbeat was late): this hold is no good, take another."""
        with connect(self.fleet.url) as conn:
            pinned = conn.execute(
                "update ingestion_jobs set lease_seconds = 3600, lease_expires_at = now() + interval '1 hour' "
                "where id = %s and status = 'processing' and lease_token is not distinct from %s "
                "and lease_expires_at > now()",
                (self.job_id, self.token),
            ).rowcount
        if not pinned:
            return False
        write_whole(self.history.with_suffix(f".partition-{self.hold_id}"), "partition")
        wait_for(self.history.with_suffix(f".partitioned-{self.hold_id}").exists, "the held lease's partition")
        return True


def pinned_hold(fleet, stalling: dict) -> Held:
    """A held build of kind `any` whose lease is pinned and partitioned (Held.pin)."""
    while True:
        held = Held(fleet, _holder(fleet, stalling), "any")
        if held.pin():
            return held
        held.go()


def _holder(fleet, stalling: dict) -> str:
    """A live worker, not stalling, that has started (a just-started one may not be yet)."""

    def candidates() -> list[str]:
        return [label for label in fleet.alive() if label not in stalling and fleet.ready(label)]

    wait_for(candidates, "a live worker to hold a build")
    return candidates()[0]


def final_attempt_kill(url: str, fleet, stats, stalling: dict, wait_backends_gone) -> None:
    """SIGKILL a worker while it holds a job on its final attempt: the job was `processing`
    under that claim when the worker died (its thread held), so only an expiry ends it."""
    held = Held(fleet, _holder(fleet, stalling), "final")
    proc = fleet.processes[held.label]
    proc.kill()
    proc.wait()
    stats.kills += 1
    fleet.start()
    stats.restarts += 1
    wait_backends_gone(url, held.label, pooled=fleet.pooled)
    stats.final_attempt_kills += 1
    stats.final_attempt_jobs.append(held.job_id)
    stats.events["final_attempt_kill"] += 1


def delete_in_flight(fleet, stats, operator, stalling: dict) -> None:
    held = pinned_hold(fleet, stalling)
    try:
        operator.delete_this_document(held.document_id)
    finally:
        held.go()
    stats.events["delete_document"] += 1


def new_version_in_flight(url: str, fleet, stats, operator, rng: random.Random, stalling: dict) -> Callable[[], bool]:
    """A new version of a held build's document; returns the condition that it committed
    (waited for after the random chaos: its job joins the back of the queue)."""
    held = pinned_hold(fleet, stalling)
    try:
        operator.new_version(rng, in_flight=True, document_id=held.document_id)
    finally:
        held.go()
    stats.events["new_version"] += 1

    def newer_committed() -> bool:
        with connect(url) as conn:
            return bool(
                conn.execute(
                    "select exists (select 1 from documents where id = %s and version > 1 "
                    "and index_generation_id is not null and status = 'indexed') as done",
                    (held.document_id,),
                ).fetchone()["done"]
            )

    return newer_committed


def retriable_failure(url: str, final_jobs: list[str]) -> bool:
    """A failed job a retry by ids may take (not a final-attempt kill's, in a live batch)."""
    with connect(url) as conn:
        return bool(
            conn.execute(
                "select exists (select 1 from ingestion_jobs j join import_batches b on b.id = j.batch_id "
                "where j.status = 'failed' and b.cancelled_at is null and not j.id = any(%s::uuid[])) as any",
                (final_jobs,),
            ).fetchone()["any"]
        )


def force_faults(
    url: str, fleet, stats, operator, rng, faults, stalling: dict, step, wait_backends_gone
) -> dict[str, Callable[[], bool]]:
    """Each fault kind among `faults`, once, in the module docstring's order. `step` is
    harness.chaos_step bound to the run (action -> None). Returns the conditions the run
    waits for before it drains (what each must be, by name)."""
    after: dict[str, Callable[[], bool]] = {}
    if "stall" in faults:
        wait_for(lambda: any(fleet.ready(label) for label in fleet.alive()), "a worker ready for SIGUSR1")
        step("stall")
    if "final_attempt_kill" in faults:
        final_attempt_kill(url, fleet, stats, stalling, wait_backends_gone)
    if "server_restart" in faults:
        step("server_restart")
    if "delete_document" in faults:
        delete_in_flight(fleet, stats, operator, stalling)
    if "retry_failed" in faults:
        wait_for(lambda: retriable_failure(url, stats.final_attempt_jobs), "a failed job to retry")
        operator.retry_failed(rng, mode="jobs")
        stats.events["retry_failed"] += 1
    if "cancel_batch" in faults:
        step("cancel_batch")
    if "new_version" in faults and operator.makes_versions:
        after["a new version committed"] = new_version_in_flight(url, fleet, stats, operator, rng, stalling)
    return after
