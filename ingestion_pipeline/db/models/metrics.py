"""The queue's metrics (db/rpc/metrics.py): what `ingest metrics` exports at each scrape."""

from __future__ import annotations

from ingestion_pipeline.db.models.refusals import RpcResult

# Every status a job may have, in the state machine's order: exported with zeros too, so a
# dashboard's series exist before the first job reaches a status.
JOB_STATUSES = ("pending", "processing", "completed", "failed", "cancelled")


class QueueMetrics(RpcResult):
    """The queue as a whole, at one instant (ingestion_queue_metrics: the migration's comment
    says what each number counts and which only grow)."""

    jobs_by_status: dict[str, int] = {}
    retry_waiting: int = 0  # pending, waiting out a retry delay
    claims: int = 0  # the sum of lease tokens: every claim ever made, only grows
    completed: int = 0  # only grows
    dead_lettered: int = 0  # failed: the lease expired on the final attempt
    stale_leases: int = 0  # processing with the lease deadline passed
    oldest_pending_seconds: float = 0.0
    completed_last_minute: int = 0
    failed_by_format: dict[str, int] = {}  # MIME type ('' when unknown) -> jobs failed for good

    def by_status(self) -> dict[str, int]:
        """Every status, zeros included, in the state machine's order (then any other)."""
        known = {status: self.jobs_by_status.get(status, 0) for status in JOB_STATUSES}
        return {**known, **self.jobs_by_status}
