"""One fault-run worker process: a real Worker whose RPCs and artifact writes are logged.
Run as `python -m tests.faults.worker_process URL HISTORY LABEL [SLOW_SECONDS [STALL_SECONDS
[STALLS_ARMED [STALL_POINTS]]]]`; SIGTERM stops it after its jobs in flight.

The stall fault: a live worker whose one job thread stalls past its lease while the claim
loop and the other job thread keep going. SIGUSR1 arms one stall (STALLS_ARMED arms some
at start). The next job thread to reach the stall point sleeps for STALL_SECONDS, or until
the file HISTORY.release exists. With STALL_SECONDS 0 (the chaos runs) each stall draws
how it ends: the first one of the process, and half of the others, 0-0.3 s after another
claim took the job over (looked up in the database; for the first, whenever that happens,
within TAKEOVER_WAIT_SECONDS; at most STALL_SECONDS for the others), the rest at a time drawn between STALL_SECONDS_MIN
and STALL_SECONDS. From the stall on, that claim's lease is partitioned: the worker's one
heartbeat statement (`heartbeat_many`) leaves it out, as if this one job's renewals were
silently lost on the way, while the worker's other leases are renewed as usual; its lease
keeper never learns that the lease is lost. Then the thread carries on as a zombie, with
the token of its old claim. Stall points, taken in turn (STALL_POINTS, comma-separated,
default both):

  begin_generation  right after begin_generation returned ok: the zombie then writes the
                    generation's rows (refused by the artifact fence, IF001, once the job
                    was taken over; or by the foreign key, 23503, when the job was done
                    and the janitor's cleanup removed the zombie's abandoned generation
                    before it woke) and, were they taken, would commit;
  commit            right before the job's completion goes out, its rows written: where
                    the job's own thread hands its completion (with the generation to
                    commit) to the worker's acknowledgement buffer (worker/acks.py), so
                    the stall holds this one job's acknowledgement and no other: the
                    others' completions go out meanwhile, in statements of their own.
                    The zombie's completion then goes out in a `complete_many` statement
                    (alone or with others' items) with its old token, and is refused
                    (lease_lost) while the other items of that statement go through.
                    (Not in complete_many itself: the buffer sends a statement from
                    whichever job thread flushes it and answers its items only when it
                    returns, so a stall there holds every item of it, and the two jobs of
                    one claim often finish together and are sent together.)

The hold fault (forced events for the harness, tests/faults/forced.py): the harness writes
HISTORY.hold (`<kind> <id>`, written whole and renamed into place); the next job thread of
this worker whose begin_generation returned ok on a job of that kind (`final`: its final
attempt; `any`: a keyed document, neither broken nor with max_attempts=1) takes the request
(renames it away: one thread wins), writes HISTORY.held-<id> (`<job id> <token>`, whole,
then renamed) and waits until HISTORY.go-<id> exists (or the process is killed). So the
harness acts on a build that is provably in flight, however slow the machine. Asked to
(HISTORY.partition-<id>), the held thread partitions its lease as a stall does and says so
(HISTORY.partitioned-<id>): the worker never learns its lease is lost, so after the harness
deleted or superseded the job the thread's next write provably reaches the database and is
refused (a heartbeat's `lost` would stop it before the write).

The history records each stall (call `stall`, with its point) and every artifact write
(call `write`). The worker treats a deadlock (40P01) or a serialization failure (40001) as
transient: it retries the call (a claim, a heartbeat) or fails the job for a retry (an
acknowledgement), so nothing else would show it; every statement of this process the
server rolled back so is in the history (call `rollback`, or the `write` entry's
`sqlstate` for an artifact write: rpc_log.py), for the checker to count."""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from pathlib import Path

import ingestion_pipeline.worker.indexing as indexing_module
from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.models import HeartbeatsResult
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from tests.faults.rpc_log import HistoryFile, LoggedRpc

FAULT_SETTINGS = {
    "stale_after_seconds": 3,
    "heartbeat_interval_seconds": 0.5,
    "retry_backoff_seconds": 0,
    "retry_backoff_max_seconds": 0.5,
    "worker_concurrency": 2,
    "claim_batch_size": 2,
    "pool_max_size": 6,
    "claim_retry_attempts": 20,
    "connect_timeout_seconds": 5,
}
# Past the lease (the last heartbeat before the stall extends it by the stale window), so
# another worker has time to reclaim the job before the zombie wakes.
STALL_SECONDS = FAULT_SETTINGS["stale_after_seconds"] + 1.5
STALL_SECONDS_MIN = FAULT_SETTINGS["stale_after_seconds"] + 0.5
# The first stall of each process waits for the takeover, so every run that stalls has a
# zombie that provably wakes after another claim took its job. The takeover must happen (the
# lease expires after the stale window, the janitor or a claim takes it): this bound only
# keeps a broken run from hanging (4 stale windows was once too short on a loaded machine).
TAKEOVER_WAIT_SECONDS = 60


class SlowEmbedder:
    """Holds each build for a while (and says so in a marker file), so a test can act on
    a worker that is provably mid-job; while the file MARKER.hold exists, a build that
    begins its embedding waits until it is gone (a test's barrier: the build stays in
    flight until the test is done acting on it, however slow the machine)."""

    name = "slow"
    dimensions = None

    def __init__(self, seconds: float, marker: Path | None):
        self.seconds = seconds
        self.marker = marker

    def embed(self, texts):
        if self.marker is not None:
            held = self.marker.with_name(self.marker.name + ".hold").exists()
            write_whole(self.marker, "embedding")
            while held and self.marker.with_name(self.marker.name + ".hold").exists():
                time.sleep(0.02)
        time.sleep(self.seconds)
        return None


class StallSwitch:
    """One-shot stalls, armed from the signal handler (main thread) and taken by job threads.
    `signalled` is written only by the main thread, so no arming is ever lost. The stalls
    take the points in turn, from a point drawn per process (so a fleet sees them all)."""

    def __init__(self, seconds: float, armed: int, points: list[str], marker: Path, release: Path):
        self.seconds = seconds
        self.signalled = armed
        self.taken = 0
        self.points = points
        self.first_point = random.randrange(len(points))
        self.marker, self.release = marker, release
        self.partitioned: set[tuple[str, int | None]] = set()  # (job id, token) left out of the heartbeats
        # Held by a heartbeat statement from choosing its leases to its answer, and by a stall
        # while it partitions its lease: a heartbeat that named the lease ended before the stall
        # began (its `t0`), and every later one leaves it out.
        self.partition_lock = threading.Lock()
        self._lock = threading.Lock()

    def arm(self, *_signal_args) -> None:
        self.signalled += 1

    def take(self, point: str) -> bool:
        with self._lock:
            if self.taken < self.signalled and self.points[(self.first_point + self.taken) % len(self.points)] == point:
                self.taken += 1
                return True
            return False

    def stall(self, rpc: FaultRpc, point: str, job_id, worker_id: str, lease_token: int | None) -> None:
        with self.partition_lock:
            self.partitioned.add((str(job_id), lease_token))  # for the rest of this claim's run
            started = time.time()
        # Written whole, then renamed: the test waits for the file to exist and reads it at once.
        write_whole(self.marker, f"{point} {job_id} {lease_token}\n")
        first = self.taken == 1  # take() counted this stall already
        on_takeover = not self.seconds and (first or random.random() < 0.5)
        if self.seconds:
            deadline = time.monotonic() + self.seconds
        elif on_takeover:
            deadline = time.monotonic() + (TAKEOVER_WAIT_SECONDS if first else STALL_SECONDS)
        else:
            deadline = time.monotonic() + random.uniform(STALL_SECONDS_MIN, STALL_SECONDS)
        claimed = rpc.claims_of(job_id) if on_takeover else None
        woke = "timer"
        while time.monotonic() < deadline:
            if self.release.exists():
                woke = "release"
                break
            if on_takeover and woke == "timer":
                now = rpc.claims_of(job_id)
                if claimed is None:
                    claimed = now
                elif now is not None and now != claimed:
                    woke = "takeover"
                    deadline = min(deadline, time.monotonic() + random.uniform(0, 0.3))
            time.sleep(0.05)
        rpc.record_stall(point, str(job_id), worker_id, lease_token, started, woke)


def write_whole(path: Path, text: str) -> None:
    """Written under a temporary name, then renamed into place: a reader that sees the file
    sees all of it (a marker read right after its writer created it once read empty)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


# A job a hold of each kind may take (tests/faults/forced.py): its attempt, its limit, and
# whether its document is a broken one (harness.BROKEN_MARK) or unkeyed.
HOLD_FITS = {
    "final": "j.attempt_count >= j.max_attempts",
    "any": "j.max_attempts > 1 and strpos(d.source_name, '-broken') = 0 and d.source_key is not null",
}


class Hold:
    """One forced hold at a time (module docstring): requested by the harness through a
    file, taken by the first job thread whose job fits, released by another file."""

    def __init__(self, history: Path, switch: StallSwitch):
        self.history, self.switch = history, switch
        self.request = history.with_suffix(".hold")

    def maybe_hold(self, rpc: FaultRpc, job_id, lease_token: int | None) -> None:
        if not self.request.exists():
            return
        try:
            kind, hold_id = self.request.read_text().split()
        except (FileNotFoundError, ValueError):  # taken by another thread meanwhile
            return
        if kind not in HOLD_FITS or not rpc.job_fits(job_id, HOLD_FITS[kind]):
            return
        taken = self.request.with_name(f"{self.request.name}-taken-{hold_id}")
        try:
            self.request.rename(taken)  # one thread takes it
        except FileNotFoundError:
            return
        write_whole(self.history.with_suffix(f".held-{hold_id}"), f"{job_id} {lease_token}\n")
        go = self.history.with_suffix(f".go-{hold_id}")
        partition = self.history.with_suffix(f".partition-{hold_id}")
        while not go.exists():
            if partition.exists():
                with self.switch.partition_lock:  # from now on no heartbeat names this lease
                    self.switch.partitioned.add((str(job_id), lease_token))
                partition.unlink()
                write_whole(self.history.with_suffix(f".partitioned-{hold_id}"), "partitioned")
            time.sleep(0.02)


class FaultRpc(LoggedRpc):
    """LoggedRpc with the stall fault: its begin_generation point and the partition of the
    stalled claim's lease (the commit point is stall_before_acknowledging; see the module
    docstring)."""

    def __init__(self, db, history: HistoryFile, switch: StallSwitch, hold: Hold | None = None, **kwargs):
        super().__init__(db, history, **kwargs)
        self.switch = switch
        self.hold = hold

    def job_fits(self, job_id, condition: str) -> bool:
        """Whether the job fits a hold's kind (HOLD_FITS); False when the look-up fails."""
        try:
            with self._connection() as conn:
                row = conn.execute(
                    f"select {condition} as fits from ingestion_jobs j join documents d on d.id = j.document_id "
                    "where j.id = %s",
                    (job_id,),
                ).fetchone()
        except Exception:  # chaos may have terminated the backend: not this job
            return False
        return bool(row and row["fits"])

    def claims_of(self, job_id) -> tuple | None:
        """How often the job was claimed, and its status (None when the look-up fails)."""
        try:
            with self._connection() as conn:
                row = conn.execute(
                    "select attempt_count, status from ingestion_jobs where id = %s", (job_id,)
                ).fetchone()
        except Exception:  # chaos may have terminated the backend: look again
            return None
        return row["attempt_count"], row["status"]

    def heartbeat_many(self, worker_id, leases):
        """The partition: a stalled claim's lease is left out of the statement (no answer
        about it, so the keeper never hears it is lost); the others are renewed."""
        with self.switch.partition_lock:
            partitioned = self.switch.partitioned
            kept = [lease for lease in leases if (str(lease.job_id), lease.lease_token) not in partitioned]
            if not kept:
                return HeartbeatsResult(ok=True)
            return super().heartbeat_many(worker_id, kept)

    def begin_generation(self, job_id, document_id, worker_id, *, lease_token=None):
        result = super().begin_generation(job_id, document_id, worker_id, lease_token=lease_token)
        if result.ok and self.switch.take("begin_generation"):
            self.switch.stall(self, "begin_generation", job_id, worker_id, lease_token)
        elif result.ok and self.hold is not None:
            self.hold.maybe_hold(self, job_id, lease_token)
        return result


def stall_before_acknowledging(worker: Worker, rpc: FaultRpc, switch: StallSwitch) -> None:
    """The commit stall point, in the job's own thread: its completion (with a generation)
    waits before it enters this worker's acknowledgement buffer."""
    acks = worker.acks
    hand_over = acks.complete

    def complete(item):
        if item.generation_id is not None and switch.take("commit"):
            switch.stall(rpc, "commit", item.job_id, worker.worker_id, item.lease_token)
        return hand_over(item)

    acks.complete = complete


def log_artifact_writes(rpc: LoggedRpc) -> None:
    """Every artifact write of this process goes into the history (worker/indexing.py calls
    the module-level `write_encoded`; only this process's copy is wrapped)."""
    original = indexing_module.write_encoded

    def write_encoded(conn, document_id, generation_id, artifacts, check_lease):
        started = time.time()
        try:
            original(conn, document_id, generation_id, artifacts, check_lease)
        except BaseException as exc:
            rpc.record_write(generation_id, started, exc)
            raise
        rpc.record_write(generation_id, started, None)

    indexing_module.write_encoded = write_encoded


def main(
    url: str,
    history_path: str,
    label: str,
    slow_seconds: float = 0.0,
    stall_seconds: float = 0.0,
    stalls_armed: int = 0,
    stall_points: str = "begin_generation,commit",
) -> int:
    settings = load_settings(database_url=url, **FAULT_SETTINGS)
    stop = threading.Event()
    history = Path(history_path)
    switch = StallSwitch(
        stall_seconds,
        stalls_armed,
        stall_points.split(","),
        history.with_suffix(".stalled"),
        history.with_suffix(".release"),
    )
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, switch.arm)
    write_whole(history.with_suffix(".ready"), "ready")  # SIGUSR1 is safe to send from now on
    pool = make_pool(url, settings, application_name=f"fault-{label}")
    marker = history.with_suffix(".embedding") if slow_seconds else None
    embedder = SlowEmbedder(slow_seconds, marker) if slow_seconds else None
    rpc = FaultRpc(
        pool,
        HistoryFile(history_path),
        switch,
        Hold(history, switch),
        caller=label,
        stale_after_seconds=settings.stale_after_seconds,
    )
    log_artifact_writes(rpc)
    worker = Worker(pool, settings, label=label, embedder=embedder, rpc=rpc, poll_seconds=0.2)
    stall_before_acknowledging(worker, rpc, switch)
    try:
        worker.run(drain=False, stop=stop)
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(
        main(
            args[0],
            args[1],
            args[2],
            float(args[3]) if len(args) > 3 else 0.0,
            float(args[4]) if len(args) > 4 else 0.0,
            int(args[5]) if len(args) > 5 else 0,
            *args[6:7],
        )
    )
