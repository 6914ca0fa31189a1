"""Import batches and the queue as a whole: create, enqueue, the counters' repair path,
and the read-only views behind sensors, `ingest status` and `ingest health`."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from ingestion_pipeline.db.models import (
    BatchCreated,
    BatchesRefreshed,
    BatchReport,
    BatchStatus,
    EnqueueResult,
    IndexTotals,
    QueueHealth,
    SensorState,
)
from ingestion_pipeline.db.rpc.base import RpcBase
from ingestion_pipeline.errors import BATCH_CANCELLED_SQLSTATE, BatchWasCancelled


class BatchRpc(RpcBase):
    def create_batch(self, name: str, metadata: dict[str, Any] | None = None) -> BatchCreated:
        return self._result(BatchCreated, "rpc_create_batch", {"name": name, "metadata": Jsonb(metadata or {})})

    def enqueue(
        self, document_id: UUID, *, batch_id: UUID | None = None, kind: str = "index", max_attempts: int = 3
    ) -> EnqueueResult:
        """Raises BatchWasCancelled when `batch_id` was cancelled (the caller's transaction is then
        aborted: roll it back)."""
        try:
            return self._result(
                EnqueueResult,
                "rpc_enqueue",
                {"document_id": document_id, "batch_id": batch_id, "kind": kind, "max_attempts": max_attempts},
            )
        except psycopg.Error as exc:
            if exc.sqlstate == BATCH_CANCELLED_SQLSTATE:
                raise BatchWasCancelled(f"import batch {batch_id} was cancelled: it takes no new files") from None
            raise

    # The repair path: recount a batch's jobs under its row lock and store the counters.

    def refresh_batch(self, batch_id: UUID) -> BatchStatus:
        return self._result(BatchStatus, "rpc_refresh_batch", {"batch_id": batch_id})

    def refresh_stuck_batches(self, *, limit: int = 100) -> BatchesRefreshed:
        """Recount batches still open although none of their jobs is."""
        return self._result(BatchesRefreshed, "rpc_refresh_stuck_batches", {"limit": limit})

    def refresh_drifted_batches(self, *, limit: int = 100) -> BatchesRefreshed:
        """Recount batches whose counters disagree with their jobs."""
        return self._result(BatchesRefreshed, "rpc_refresh_drifted_batches", {"limit": limit})

    def sensor_state(self, *, limit: int = 100) -> SensorState:
        """Claimable work and stuck batches, in one cheap call (Dagster sensors)."""
        return self._result(
            SensorState, "rpc_sensor_state", {"stale_after_seconds": self.stale_after_seconds, "limit": limit}
        )

    def batch_report(
        self, *, batch_id: UUID | None = None, limit: int = 20, collection: str | None = None
    ) -> BatchReport:
        """Batches with their job counts and recent failures (`ingest status`); with a
        collection, the batches holding its documents, their jobs of it counted, its failures."""
        params = {"batch_id": batch_id, "limit": limit}
        if collection is None:  # the call every supported schema resolves
            return self._result(BatchReport, "rpc_batch_report", params)
        return self._result(BatchReport, "rpc_batch_report_of_collection", {**params, "collection": collection})

    def index_totals(self) -> IndexTotals:
        """What the index holds: documents by status, chunks, collections, sources, failed
        jobs, and the mark of the latest drain (`ingest status`, the Dagster asset)."""
        return self._result(IndexTotals, "rpc_index_totals", {})

    def queue_health(self, stale_after_seconds: int | None = None) -> QueueHealth:
        return self._result(
            QueueHealth, "rpc_queue_health", {"stale_after_seconds": stale_after_seconds or self.stale_after_seconds}
        )
