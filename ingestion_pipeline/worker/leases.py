"""The worker's leases: one heartbeat thread renews every lease the worker holds, in one
statement per interval (R1), and tells each job's thread when its lease is lost."""

from __future__ import annotations

import logging
import threading
import time
from uuid import UUID

from ingestion_pipeline.db.models import ClaimedJob, LeaseBeat
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.worker.errors import LeaseLost, describe

log = logging.getLogger(__name__)


class Lease:
    """One claimed job's lease, as its building thread sees it. `lost` is set by a
    heartbeat answer (or by the job itself when a fenced call was refused); the thread
    calls `check()` before each write. `release()` stops the renewals: the job is about to
    be acknowledged (a renewal after that would be refused, a spurious alarm)."""

    def __init__(self, keeper: LeaseKeeper, job_id: UUID, lease_token: int | None):
        self._keeper = keeper
        self.job_id = job_id
        self.lease_token = lease_token
        self.held_at = time.monotonic()
        self.lost = threading.Event()
        # Set with `lost` when the job ran past INGEST_JOB_TIMEOUT_SECONDS: the lease is still
        # valid (just no longer renewed), so the job's thread records the failure itself.
        self.timed_out = threading.Event()
        self.stage: str | None = None
        self.progress: int | None = None

    @property
    def key(self) -> tuple[UUID, int | None]:
        return self.job_id, self.lease_token

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def report(self, stage: str, progress: int) -> None:
        self.stage, self.progress = stage, progress

    def check(self) -> None:
        if self.lost.is_set():
            raise LeaseLost(f"lease on job {self.job_id} was lost")

    def release(self) -> None:
        """No more renewals (idempotent)."""
        self._keeper.forget(self)


class LeaseKeeper:
    """Holds the worker's leases and renews them every `interval` seconds from one thread,
    all in one statement (`heartbeat_many`). A failed heartbeat (a database hiccup) is
    logged and tried again next tick: the stale window is several intervals."""

    def __init__(self, rpc: IngestionRpc, worker_id: str, interval: float, job_timeout: float | None = None):
        self._rpc = rpc
        self._worker_id = worker_id
        self._interval = interval
        self._job_timeout = job_timeout
        # By job and token: a stalled thread's old claim and a new claim of the same job by
        # this worker are two leases, and the old one learns it is lost.
        self._leases: dict[tuple[UUID, int | None], Lease] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, job: ClaimedJob) -> Lease:
        lease = Lease(self, job.job_id, job.lease_token)
        with self._lock:
            self._leases[lease.key] = lease
        return lease

    def forget(self, lease: Lease) -> None:
        with self._lock:
            if self._leases.get(lease.key) is lease:
                del self._leases[lease.key]

    def start(self) -> LeaseKeeper:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self._worker_id}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def beat(self) -> None:
        """Renew every held lease now (the thread's tick; tests call it to force one)."""
        with self._lock:
            leases = [lease for lease in self._leases.values() if not self._over_time(lease)]
        if not leases:
            return
        answer = self._rpc.heartbeat_many(
            self._worker_id,
            [LeaseBeat(lease.job_id, lease.lease_token, lease.stage, lease.progress) for lease in leases],
        )
        lost = {(ref.job_id, ref.lease_token) for ref in answer.lost}
        with self._lock:
            for lease in leases:
                # A lease released while the beat was in flight was acknowledged: not lost.
                if lease.key in lost and self._leases.get(lease.key) is lease:
                    log.warning(
                        "job %s: lease lost (heartbeat: reclaimed, or cancelled by a delete or a batch "
                        "cancel); stopping",
                        lease.job_id,
                    )
                    lease.lost.set()

    def _over_time(self, lease: Lease) -> bool:
        """A job past the per-job limit: no more renewals, and its thread is told to stop."""
        if self._job_timeout is None or time.monotonic() - lease.held_at < self._job_timeout:
            return False
        if not lease.timed_out.is_set():
            log.warning(
                "job %s: still running %.0f s after its claim (INGEST_JOB_TIMEOUT_SECONDS); no longer "
                "renewing its lease, failing it",
                lease.job_id,
                self._job_timeout,
            )
            lease.timed_out.set()
            lease.lost.set()
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - keep beating; a stale lease is the real deadline
                log.warning("heartbeat failed: %s", describe(exc))
