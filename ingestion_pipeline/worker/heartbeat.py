"""Renews a job's lease from a background thread while the job is built (R1)."""

from __future__ import annotations

import logging
import threading
from uuid import UUID

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.worker.errors import LeaseLost, describe

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Heartbeats every `interval` seconds. A `lease_lost` answer sets `lost`, and the
    building thread checks it (`check()`) before each write. A failed heartbeat (database
    hiccup) is logged and tried again next tick: the stale window is several intervals."""

    def __init__(self, rpc: IngestionRpc, job_id: UUID, worker_id: str, lease_token: int | None,
                 interval: float):
        self._rpc = rpc
        self._job_id = job_id
        self._worker_id = worker_id
        self._lease_token = lease_token
        self._interval = interval
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.progress: int | None = None
        self.stage: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> None:
        """No more heartbeats (idempotent); waits for one in flight. Called before the
        job completes: a heartbeat after completion would be refused (`lease_lost`), a
        spurious alarm about a job that finished."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def report(self, stage: str, progress: int) -> None:
        self.stage, self.progress = stage, progress

    def check(self) -> None:
        if self.lost.is_set():
            raise LeaseLost(f"lease on job {self._job_id} was lost")

    def beat(self) -> None:
        """One heartbeat now (also used by tests to force the check)."""
        result = self._rpc.heartbeat(self._job_id, self._worker_id, lease_token=self._lease_token,
                                     progress=self.progress, stage=self.stage)
        if result.lease_lost:
            log.warning("job %s: lease lost (heartbeat); stopping", self._job_id)
            self.lost.set()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.beat()
            except Exception as exc:  # keep beating; a stale lease is the real deadline
                log.warning("job %s: heartbeat failed: %s", self._job_id, describe(exc))
            if self.lost.is_set():
                return
