"""The `status` tool of the MCP server (mcp_server.py): per collection, the latest import
batches holding its documents with the jobs of its documents counted, and its failed jobs.

A batch may hold documents of several collections (`ingest reindex` queues every one's in
one batch), and its stored status counts them all. To an app's reader (`--as-user`,
`--as-anon`) each line shows only what comes from the one collection it may read: that
collection's jobs counted, and a status made from those counts (`reader_status`), never the
batch's own, which a private collection's failure would make `completed_with_errors`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ingestion_pipeline.api import Index
from ingestion_pipeline.db.models import BatchSummary

STATUS_COLLECTIONS = 10
STATUS_BATCHES = 10
STATUS_FAILURES = 10
MESSAGE_CHARS = 300


class BatchLine(BaseModel):
    name: str
    status: str = Field(description="the batch's status; to an app reader, that of the collection's jobs in it only")
    jobs: int
    pending: int
    processing: int
    completed: int
    failed: int
    cancelled: int
    oldest_pending_age_seconds: int | None


class FailureLine(BaseModel):
    source_name: str
    source_uri: str | None
    collection: str | None
    version: int | None
    indexed_version: int | None = Field(description="what search still returns for it; null: nothing")
    stage: str | None
    error: str | None
    attempts: int
    failed_at: str | None


class CollectionStatus(BaseModel):
    collection: str | None = Field(description="null: every collection")
    batches: list[BatchLine] = Field(description=f"the latest {STATUS_BATCHES} batches, newest first")
    failures: list[FailureLine] = Field(description=f"at most {STATUS_FAILURES} failed jobs")
    truncated: bool = Field(description="true when there were more failures than shown")


class StatusResult(BaseModel):
    collections: list[CollectionStatus]
    collections_not_shown: list[str] = Field(
        description=f"collections past the first {STATUS_COLLECTIONS}: ask for one by name"
    )


def collection_status(index: Index, collection: str | None, *, reader: bool) -> CollectionStatus:
    """`collection`'s batches and failures (None: every collection's, for a caller that reads
    them all); `reader`: shown to an app's reader, each batch's status made from the
    collection's own jobs."""
    report = index.status(limit=STATUS_BATCHES, collection=collection)
    failures = report.failures[:STATUS_FAILURES]
    return CollectionStatus(
        collection=collection,
        batches=[_batch(batch, reader=reader) for batch in report.batches[:STATUS_BATCHES]],
        failures=[_failure(failure.model_dump()) for failure in failures],
        truncated=len(report.failures) > len(failures),
    )


def reader_status(batch: BatchSummary) -> str:
    """The batch's status as the jobs counted give it (those of one collection, with
    `collection=`), by the rule the schema's import_batch_status_of applies to all of its jobs:
    jobs open, then a cancelled batch (an operator's act on the batch), then failures."""
    if batch.pending or batch.processing:
        return "processing"
    if (batch.model_extra or {}).get("cancelled_at") is not None:
        return "cancelled"
    return "completed_with_errors" if batch.failed else "completed"


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _batch(batch: BatchSummary, *, reader: bool) -> BatchLine:
    line = BatchLine.model_validate(batch.model_dump())
    return line.model_copy(update={"status": reader_status(batch)}) if reader else line


def _failure(row: dict[str, Any]) -> FailureLine:
    failed_at = row.get("failed_at")
    return FailureLine(
        source_name=row["source_name"],
        source_uri=row.get("source_key"),
        collection=row.get("collection"),
        version=row.get("version"),
        indexed_version=row.get("indexed_version"),
        stage=row.get("stage"),
        error=cut(row["error_message"], MESSAGE_CHARS) if row.get("error_message") else None,
        attempts=row["attempt_count"],
        failed_at=failed_at.isoformat() if failed_at else None,
    )
