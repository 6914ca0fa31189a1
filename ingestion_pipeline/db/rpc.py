"""Typed client for the state-machine RPCs: one method per RPC, pydantic results.

Fences (db/fences.py): the client learns from the catalog which generation of fenced
signatures the database has, once, and calls that form. With lease tokens (the newest
schema) every fenced call carries the token the claim returned; a worker-id-fenced
database gets the worker-id form; a pre-hardening one the unfenced form, each such result
marked `fenced=False` and logged once. While the database is older than the newest
schema the level is looked up again at each claim, so a running worker picks up the
fences as soon as the database is migrated.

The client runs each RPC as one statement. Given a pool it borrows an autocommit
connection per call (each RPC is its own transaction); given a connection it uses that
one, so a caller may hold a transaction open around several calls (the race tests do).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import TypeVar
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db import fences
from ingestion_pipeline.db.fences import FenceLevel
from ingestion_pipeline.db.models import (
    BatchCreated,
    BatchStatus,
    CleanupResult,
    ClaimedJob,
    CommitResult,
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
        self._fence_level: FenceLevel | None = None

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

    @property
    def fence_level(self) -> FenceLevel:
        """The database's fence generation, looked up in the catalog on first use."""
        if self._fence_level is None:
            with self._connection() as conn:
                self._fence_level = fences.probe(conn)
            if self._fence_level < FenceLevel.LEASE_TOKEN:
                log.warning("this database has %s fences, not lease tokens (schema older than the lease-token "
                            "migration)%s. Run `ingest db migrate`.", self._fence_level.name.lower(),
                            "; state RPCs run unfenced" if self._fence_level is FenceLevel.NONE else "")
            elif self._fence_level < fences.NEWEST:
                log.warning("this database's schema is older than this client's (%s): retry delays are computed "
                            "on this machine's clock. Run `ingest db migrate`.", self._fence_level.name.lower())
        return self._fence_level

    def _reprobe_if_outdated(self) -> None:
        if self._fence_level is not None and self._fence_level < fences.NEWEST:
            with self._connection() as conn:
                self._fence_level = fences.probe(conn)

    def _fenced(self, model: type[R], rpc: str, params: dict) -> R:
        """Call `rpc` in the form this database's fence level offers; an RPC the schema
        lacks (heartbeat and stage log before the hardening) is an unfenced no-op."""
        level = self.fence_level
        name = fences.query_for(rpc, level)
        if name is None:
            return model(ok=True, fenced=False)
        result = self._result(model, name, params)
        return result if level > FenceLevel.NONE else result.model_copy(update={"fenced": False})

    # -- the RPCs -------------------------------------------------------------------

    def create_batch(self, name: str, metadata: dict | None = None) -> BatchCreated:
        return self._result(BatchCreated, "rpc_create_batch", {"name": name, "metadata": Jsonb(metadata or {})})

    def enqueue(self, document_id: UUID, *, batch_id: UUID | None = None, kind: str = "index",
                max_attempts: int = 3) -> EnqueueResult:
        return self._result(EnqueueResult, "rpc_enqueue", {
            "document_id": document_id, "batch_id": batch_id, "kind": kind, "max_attempts": max_attempts})

    def claim(self, worker_id: str, limit: int = 1, stale_after_seconds: int | None = None) -> list[ClaimedJob]:
        """Claim up to `limit` jobs; each gets a lease of `stale_after_seconds` (the
        client's default when not given) and, on the newest schema, a fresh token."""
        self._reprobe_if_outdated()
        params = {"worker_id": worker_id, "limit": limit,
                  "stale_after_seconds": stale_after_seconds or self.stale_after_seconds}
        with self._connection() as conn:
            rows = conn.execute(query("rpc_claim"), params).fetchall()
        return [ClaimedJob.model_validate(row) for row in rows]

    # Fenced calls take the claim's `lease_token`. Without one (None) the database falls
    # back to the worker-id fence, as it does for calls of earlier releases.

    def heartbeat(self, job_id: UUID, worker_id: str, *, lease_token: int | None = None,
                  progress: int | None = None, stage: str | None = None) -> HeartbeatResult:
        # Pre-hardening databases have no heartbeat: leases cannot be renewed there (R1).
        return self._fenced(HeartbeatResult, "heartbeat", {
            "job_id": job_id, "worker_id": worker_id, "lease_token": lease_token, "progress": progress,
            "stage": stage})

    def begin_generation(self, job_id: UUID, document_id: UUID, worker_id: str, *,
                         lease_token: int | None = None) -> GenerationResult:
        return self._fenced(GenerationResult, "begin_generation", {
            "job_id": job_id, "document_id": document_id, "worker_id": worker_id, "lease_token": lease_token})

    def commit_generation(self, job_id: UUID, document_id: UUID, generation_id: UUID, worker_id: str | None,
                          metadata: dict | None = None, *, lease_token: int | None = None) -> GenerationResult:
        return self._fenced(GenerationResult, "commit_generation", {
            "job_id": job_id, "document_id": document_id, "generation_id": generation_id,
            "worker_id": worker_id, "metadata": Jsonb(metadata or {}), "lease_token": lease_token})

    def complete(self, job_id: UUID, document_id: UUID, *, worker_id: str | None, lease_token: int | None = None,
                 batch_id: UUID | None = None, stage: str = "indexed") -> JobOutcome:
        return self._fenced(JobOutcome, "complete", {
            "job_id": job_id, "document_id": document_id, "batch_id": batch_id, "stage": stage,
            "worker_id": worker_id, "lease_token": lease_token})

    def commit_and_complete(self, job_id: UUID, document_id: UUID, generation_id: UUID, *, worker_id: str,
                            lease_token: int | None, metadata: dict | None = None,
                            batch_id: UUID | None = None) -> CommitResult:
        """Commit the generation and complete the job. With a token on the newest schema
        that is one transaction; older schemas (or no token) get the two calls of earlier
        releases, and `committed` says whether the first one went through."""
        if self.fence_level >= FenceLevel.LEASE_TOKEN and lease_token is not None:
            return self._result(CommitResult, "rpc_commit_and_complete", {
                "job_id": job_id, "document_id": document_id, "generation_id": generation_id,
                "lease_token": lease_token, "metadata": Jsonb(metadata or {}), "batch_id": batch_id,
                "stage": "indexed", "worker_id": worker_id})  # worker_id: not sent, kept for loggers
        committed = self.commit_generation(job_id, document_id, generation_id, worker_id, metadata,
                                           lease_token=lease_token)
        if not committed.ok:
            return CommitResult.model_validate(committed.model_dump())
        completed = self.complete(job_id, document_id, worker_id=worker_id, lease_token=lease_token,
                                  batch_id=batch_id)
        return CommitResult.model_validate({**committed.model_dump(), **completed.model_dump(), "committed": True})

    def fail_or_retry(self, job_id: UUID, document_id: UUID, *, worker_id: str | None,
                      lease_token: int | None = None, retry: bool = False, error_message: str | None = None,
                      next_run_at: datetime | None = None, batch_id: UUID | None = None,
                      document_status: str = "failed", stage: str = "failed",
                      retry_delay_seconds: float | None = None) -> JobOutcome:
        """Fail the job, or re-queue it while attempts remain. A retry runs again after
        `retry_delay_seconds`, counted on the database server's clock; on a schema older
        than that parameter the delay is added to this machine's clock instead (or
        `next_run_at` is sent as given)."""
        if retry_delay_seconds is not None and next_run_at is None and self.fence_level < FenceLevel.SERVER_RETRY_DELAY:
            next_run_at = datetime.now(timezone.utc) + timedelta(seconds=retry_delay_seconds)
        return self._fenced(JobOutcome, "fail_or_retry", {
            "job_id": job_id, "document_id": document_id, "batch_id": batch_id, "retry": retry,
            "document_status": document_status, "stage": stage, "error_message": error_message,
            "next_run_at": next_run_at, "worker_id": worker_id, "lease_token": lease_token,
            "retry_delay_seconds": retry_delay_seconds})

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
                     finished_at: datetime, detail: dict | None = None,
                     lease_token: int | None = None) -> RpcResult:
        """Append to the stage log, only while the caller holds the lease (a no-op on a
        pre-hardening database, which has no stage log RPC)."""
        return self._fenced(RpcResult, "record_stage", {
            "job_id": job_id, "worker_id": worker_id, "stage": stage, "started_at": started_at,
            "finished_at": finished_at, "detail": Jsonb(detail or {}), "lease_token": lease_token})

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


def _row_value(row) -> dict:
    if row is None or row.get("result") is None:
        raise RuntimeError("RPC returned no result")
    return row["result"]
