"""Results of the batch RPCs and views (db/rpc/batches.py): a batch created, its counters,
an enqueued job, the sensor's state, the repair path's recounts, `ingest status` (batches and
recent failures), what the index holds and the queue's health."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ingestion_pipeline.db.models.refusals import RpcResult


class BatchCreated(RpcResult):
    batch_id: UUID | None = None


class BatchStatus(RpcResult):
    batch_id: UUID | None = None
    status: Literal["pending", "processing", "completed", "completed_with_errors", "cancelled"] | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    open: int = 0


class EnqueueResult(RpcResult):
    job_id: UUID | None = None


class SensorState(RpcResult):
    claimable: int = 0
    pending_later: int = 0
    processing: int = 0
    stuck_batch_ids: list[UUID] = []


class BatchesRefreshed(RpcResult):
    """Batches recounted by the repair path (stuck, or counters drifted)."""

    refreshed: int = 0
    batches: list[BatchStatus] = []


class BatchSummary(BaseModel):
    """One batch in `ingest status`: its stored counters and its jobs counted by status."""

    model_config = ConfigDict(extra="allow", frozen=True)

    batch_id: UUID
    name: str
    status: str
    total_files: int = 0
    jobs: int = 0  # its jobs counted (of one collection, with `ingest status --collection`)
    pending: int = 0
    processing: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    oldest_pending_age_seconds: int | None = None


class FailedJob(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    job_id: UUID
    batch_id: UUID | None = None
    document_id: UUID
    source_name: str
    collection: str | None = None
    source_key: str | None = None
    version: int | None = None
    indexed_version: int | None = None  # what search still returns (None: nothing; older schemas: unknown)
    latest_version: int | None = None
    attempt_count: int
    max_attempts: int
    stage: str | None = None
    error_message: str | None = None
    failed_at: datetime | None = None


class BatchReport(RpcResult):
    """`ingest status`: batches with their job counts, and recent failures."""

    batches: list[BatchSummary] = []
    failures: list[FailedJob] = []


class QueueHealth(RpcResult):
    jobs_by_status: dict[str, int] = {}
    oldest_pending_age_seconds: int | None = None
    stale_leases: int = 0
    stuck_batches: int = 0
    count_mismatches: int = 0
    indexed_without_generation: int = 0
    generations_awaiting_cleanup: int = 0
    batch_counter_drift: int = 0
    # live keyless documents with the bytes of a keyed document's latest version (a previous
    # release's enqueue during the upgrade), and the first 20 ids; absent before …_upgrade_window
    keyless_duplicates: int = 0
    keyless_duplicate_ids: list[UUID] = []


# Every status a live document can have: the totals list each, zeros included, so that a
# status nobody has is shown as 0 rather than left out.
DOCUMENT_STATUSES = ("queued", "processing", "indexed", "failed", "cancelled")


class IndexTotals(RpcResult):
    """What the index holds as a whole (`ingest status`, the Dagster asset's metadata)."""

    documents_by_status: dict[str, int] = {}  # live documents only
    chunks: int = 0  # of live documents' committed generations: what search reads
    collections: int = 0
    sources: int = 0
    failed_jobs: int = 0  # failed for good: what `ingest retry --all-failed` would queue
    jobs_finished: int = 0  # completed or failed: with last_finished_at, the mark of a drain
    last_finished_at: datetime | None = None

    @property
    def documents(self) -> int:
        return sum(self.documents_by_status.values())

    def by_status(self) -> dict[str, int]:
        """Every status, zeros included, in the state machine's order (then any other)."""
        known = {status: self.documents_by_status.get(status, 0) for status in DOCUMENT_STATUSES}
        return {**known, **self.documents_by_status}

    def drain_mark(self) -> str:
        """Changes whenever a drain finishes a job: the jobs finished and the latest's time."""
        at = self.last_finished_at.isoformat() if self.last_finished_at else "never"
        return f"{self.jobs_finished}@{at}"
