"""The queue's metrics, read-only (`ingest metrics`, at each scrape)."""

from __future__ import annotations

from ingestion_pipeline.db.models import QueueMetrics
from ingestion_pipeline.db.rpc.base import RpcBase


class MetricsRpc(RpcBase):
    def queue_metrics(self) -> QueueMetrics:
        """Jobs by status, claims, completions, failures by format, stale leases, the oldest
        pending job's age and the last minute's completions, of every worker."""
        return self._result(QueueMetrics, "rpc_queue_metrics", {})
