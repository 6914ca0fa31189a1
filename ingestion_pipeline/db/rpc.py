"""Typed client for the state-machine RPCs: one method per RPC, pydantic results.

Expand/contract fallback: the fenced signatures arrive with the hardening migration. If
the database is older, calling them fails with SQLSTATE 42883 (undefined_function); the
client then uses the pre-hardening call, logs once that fences are unavailable, sets
`fences_available = False`, and marks each such result `fenced=False`.

The client runs each RPC as one statement. Given a pool it borrows an autocommit
connection per call (each RPC is its own transaction); given a connection it uses that
one, so a caller may hold a transaction open around several calls (the race tests do).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TypeVar
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db.models import (
    BatchCreated,
    BatchStatus,
    CleanupResult,
    ClaimedJob,
    EnqueueResult,
    ExpireResult,
    GenerationResult,
    HeartbeatResult,
    JobOutcome,
    QueueHealth,
    RpcResult,
    SensorState,
    StuckBatchesRefreshed,
)
from ingestion_pipeline.db.queries import query

log = logging.getLogger(__name__)
R = TypeVar("R", bound=RpcResult)


class IngestionRpc:
    def __init__(self, db: psycopg.Connection | ConnectionPool, stale_after_seconds: int = 300):
        self._db = db
        self.stale_after_seconds = stale_after_seconds
        # None until a fenced call has told us; False after a 42883 fallback.
        self.fences_available: bool | None = None
        self._warned_unfenced = False

    # -- plumbing -------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        if isinstance(self._db, ConnectionPool):
            with self._db.connection() as conn:
                yield conn
        else:
            yield self._db

    def _result(self, model: type[R], name: str, params: dict) -> R:
        with self._connection() as conn:
            row = conn.execute(query(name), params).fetchone()
        return model.model_validate(_row_value(row))

    def _fenced(self, model: type[R], name: str, params: dict, *, has_legacy: bool = True) -> R:
        """Call the fenced form; on a pre-hardening database fall back to `<name>_legacy`
        (or, when the old schema has no such RPC at all, report an unfenced no-op).

        The fenced form is tried on every call, so a worker that started against an old
        schema becomes fenced as soon as the database is migrated."""
        with self._connection() as conn:
            try:
                with _savepoint_if_in_transaction(conn):
                    row = conn.execute(query(name), params).fetchone()
                self.fences_available = True
                return model.model_validate(_row_value(row))
            except psycopg.errors.UndefinedFunction:
                self._fences_missing(name)
        if not has_legacy:
            return model(ok=True, fenced=False)
        legacy = {k: v for k, v in params.items() if k != "worker_id"}
        result = self._result(model, f"{name}_legacy", legacy)
        return result.model_copy(update={"fenced": False})

    def _fences_missing(self, name: str) -> None:
        if not self._warned_unfenced:
            self._warned_unfenced = True
            log.warning(
                "lease fences are unavailable: %s has no fenced signature on this database "
                "(schema older than the hardening migration); calling the unfenced form. "
                "Run `ingest db migrate`.",
                name.removeprefix("rpc_"),
            )
        self.fences_available = False

    # -- the RPCs -------------------------------------------------------------------

    def create_batch(self, name: str, metadata: dict | None = None) -> BatchCreated:
        return self._result(BatchCreated, "rpc_create_batch", {"name": name, "metadata": Jsonb(metadata or {})})

    def enqueue(self, document_id: UUID, *, batch_id: UUID | None = None, kind: str = "index",
                max_attempts: int = 3) -> EnqueueResult:
        return self._result(EnqueueResult, "rpc_enqueue", {
            "document_id": document_id, "batch_id": batch_id, "kind": kind, "max_attempts": max_attempts})

    def claim(self, worker_id: str, limit: int = 1, stale_after_seconds: int | None = None) -> list[ClaimedJob]:
        params = {"worker_id": worker_id, "limit": limit,
                  "stale_after_seconds": stale_after_seconds or self.stale_after_seconds}
        with self._connection() as conn:
            rows = conn.execute(query("rpc_claim"), params).fetchall()
        return [ClaimedJob.model_validate(row) for row in rows]

    def heartbeat(self, job_id: UUID, worker_id: str, *, progress: int | None = None,
                  stage: str | None = None) -> HeartbeatResult:
        # Pre-hardening databases have no heartbeat: leases cannot be renewed there (R1).
        return self._fenced(HeartbeatResult, "rpc_heartbeat", {
            "job_id": job_id, "worker_id": worker_id, "progress": progress, "stage": stage},
            has_legacy=False)

    def begin_generation(self, job_id: UUID, document_id: UUID, worker_id: str) -> GenerationResult:
        return self._result(GenerationResult, "rpc_begin_generation", {
            "job_id": job_id, "document_id": document_id, "worker_id": worker_id})

    def commit_generation(self, job_id: UUID, document_id: UUID, generation_id: UUID, worker_id: str,
                          metadata: dict | None = None) -> GenerationResult:
        return self._fenced(GenerationResult, "rpc_commit_generation", {
            "job_id": job_id, "document_id": document_id, "generation_id": generation_id,
            "worker_id": worker_id, "metadata": Jsonb(metadata or {})})

    def complete(self, job_id: UUID, document_id: UUID, *, worker_id: str | None,
                 batch_id: UUID | None = None, stage: str = "indexed") -> JobOutcome:
        return self._fenced(JobOutcome, "rpc_complete", {
            "job_id": job_id, "document_id": document_id, "batch_id": batch_id, "stage": stage,
            "worker_id": worker_id})

    def fail_or_retry(self, job_id: UUID, document_id: UUID, *, worker_id: str | None,
                      retry: bool = False, error_message: str | None = None,
                      next_run_at: datetime | None = None, batch_id: UUID | None = None,
                      document_status: str = "failed", stage: str = "failed") -> JobOutcome:
        return self._fenced(JobOutcome, "rpc_fail_or_retry", {
            "job_id": job_id, "document_id": document_id, "batch_id": batch_id, "retry": retry,
            "document_status": document_status, "stage": stage, "error_message": error_message,
            "next_run_at": next_run_at, "worker_id": worker_id})

    def refresh_batch(self, batch_id: UUID) -> BatchStatus:
        return self._result(BatchStatus, "rpc_refresh_batch", {"batch_id": batch_id})

    def retry(self, job_id: UUID) -> JobOutcome:
        return self._result(JobOutcome, "rpc_retry", {"job_id": job_id})

    def expire_stale(self, stale_after_seconds: int | None = None) -> ExpireResult:
        return self._result(ExpireResult, "rpc_expire_stale", {
            "stale_after_seconds": stale_after_seconds or self.stale_after_seconds})

    def cleanup_generations(self, *, document_id: UUID | None = None, limit: int = 100,
                            dry_run: bool = True) -> CleanupResult:
        return self._result(CleanupResult, "rpc_cleanup", {
            "document_id": document_id, "limit": limit, "dry_run": dry_run})

    def record_stage(self, job_id: UUID, worker_id: str, stage: str, *, started_at: datetime,
                     finished_at: datetime, detail: dict | None = None) -> RpcResult:
        """Append to the stage log, only while `worker_id` holds the lease (a no-op on a
        pre-hardening database, which has no stage log RPC)."""
        return self._fenced(RpcResult, "rpc_record_stage", {
            "job_id": job_id, "worker_id": worker_id, "stage": stage, "started_at": started_at,
            "finished_at": finished_at, "detail": Jsonb(detail or {})}, has_legacy=False)

    def sensor_state(self, *, limit: int = 100) -> SensorState:
        """Claimable work and stuck batches, in one cheap call (Dagster sensors)."""
        return self._result(SensorState, "rpc_sensor_state", {
            "stale_after_seconds": self.stale_after_seconds, "limit": limit})

    def refresh_stuck_batches(self, *, limit: int = 100) -> StuckBatchesRefreshed:
        return self._result(StuckBatchesRefreshed, "rpc_refresh_stuck_batches", {"limit": limit})

    def batch_report(self, *, batch_id: UUID | None = None, limit: int = 20) -> dict:
        """Batches with their job counts and recent failures (`ingest status`)."""
        with self._connection() as conn:
            row = conn.execute(query("rpc_batch_report"), {"batch_id": batch_id, "limit": limit}).fetchone()
        return _row_value(row)

    def queue_health(self, stale_after_seconds: int | None = None) -> QueueHealth:
        return self._result(QueueHealth, "rpc_queue_health", {
            "stale_after_seconds": stale_after_seconds or self.stale_after_seconds})


@contextmanager
def _savepoint_if_in_transaction(conn: psycopg.Connection) -> Iterator[None]:
    """Inside a caller's transaction, a savepoint keeps a 42883 from poisoning it. On an
    idle autocommit connection (the pool's) a failed statement poisons nothing, and
    BEGIN/COMMIT around every call would triple its round trips."""
    if conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        yield
    else:
        with conn.transaction():
            yield


def _row_value(row) -> dict:
    if row is None or row.get("result") is None:
        raise RuntimeError("RPC returned no result")
    return row["result"]
