"""What `document_index` shows of the index as a whole: its totals as the database holds
them (`ingestion_index_totals`, the read `ingest status` prints), recorded with every
materialization whoever drained. A drain run records them next to its own numbers;
`index_totals_sensor` reports them when a drain that Dagster did not run (`ingest work`)
finished jobs since the latest materialization."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from ingestion_pipeline.db.models import IndexTotals

# The two keys that mark the latest drain a materialization saw (IndexTotals.drain_mark).
JOBS_FINISHED = "jobs_finished"
LAST_FINISHED_AT = "last_job_finished_at"


def totals_metadata(totals: IndexTotals) -> dict[str, Any]:
    """Documents (live, then by status, zeros included), chunks, collections, sources, jobs
    failed for good, and the mark of the latest drain."""
    metadata: dict[str, Any] = {
        "documents": totals.documents,
        **{f"documents_{status}": count for status, count in totals.by_status().items()},
        "chunks": totals.chunks,
        "collections": totals.collections,
        "sources": totals.sources,
        "failed_jobs": totals.failed_jobs,
        JOBS_FINISHED: totals.jobs_finished,
    }
    if totals.last_finished_at is not None:
        metadata[LAST_FINISHED_AT] = dg.MetadataValue.timestamp(totals.last_finished_at)
    return metadata


def drain_mark(metadata: Mapping[str, Any]) -> tuple[object, object] | None:
    """The mark recorded in a materialization's metadata (None before this release's
    materializations), in the form totals_metadata writes it."""
    if JOBS_FINISHED not in metadata:
        return None
    at = metadata.get(LAST_FINISHED_AT)
    return (_value(metadata[JOBS_FINISHED]), _value(at) if at is not None else None)


def current_mark(totals: IndexTotals) -> tuple[object, object]:
    return drain_mark(totals_metadata(totals)) or (None, None)


def _value(entry: Any) -> object:
    return entry.value if isinstance(entry, dg.MetadataValue) else entry


def latest_materialization_metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> Mapping[str, Any] | None:
    event = instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event else None
    return materialization.metadata if materialization else None
