"""The items the bulk RPCs take (frozen dataclasses, not results): a lease to renew with its
job's stage and progress, a stage-log row, a job to complete (with its generation to commit)
and a job to fail or re-queue."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

# -- items of the bulk RPCs ---------------------------------------------------------------


@dataclass(frozen=True)
class LeaseBeat:
    """One lease to renew, with the stage and progress to show for its job."""

    job_id: UUID
    lease_token: int | None
    stage: str | None = None
    progress: int | None = None


@dataclass(frozen=True)
class StageRow:
    """One row of a job's stage log, sent with the job's acknowledgement."""

    stage: str
    started_at: datetime
    finished_at: datetime
    detail: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class CompleteItem:
    """Complete a job; with a generation, commit it in the same transaction first.
    `stages`: its stage-log rows, written only if the completion is accepted."""

    job_id: UUID
    document_id: UUID
    lease_token: int | None
    generation_id: UUID | None = None
    metadata: dict[str, Any] | None = None
    batch_id: UUID | None = None
    stage: str = "indexed"
    worker_id: str | None = None
    stages: tuple[StageRow, ...] = ()
    # What the generation records of the embedder that made its vectors: {"name",
    # "dimensions", "version"} (processing.EmbedderRecord.as_json). The previous release's
    # schema ignores it.
    embedder: dict[str, Any] | None = None


@dataclass(frozen=True)
class FailItem:
    """Fail a job, or re-queue it after `retry_delay_seconds` while attempts remain."""

    job_id: UUID
    document_id: UUID
    lease_token: int | None
    retry: bool = False
    error_message: str | None = None
    stage: str = "failed"
    document_status: str = "failed"
    retry_delay_seconds: float | None = None
    batch_id: UUID | None = None
    worker_id: str | None = None
    stages: tuple[StageRow, ...] = ()
