"""What happened to one claimed job."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from uuid import UUID


class Outcome(enum.StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"  # terminal: permanent error, or attempts exhausted
    RETRIED = "retried"  # back to pending with a backoff
    RELEASED = "released"  # a fault of the worker: back to pending, the attempt refunded
    LEASE_LOST = "lease_lost"  # another worker holds the job now, or it was cancelled; we stopped cleanly
    ABANDONED = "abandoned"  # could not even record the failure (database gone); lease will expire


@dataclass(frozen=True)
class JobResult:
    job_id: UUID
    document_id: UUID
    source_name: str
    outcome: Outcome
    seconds: float
    message: str | None = None
    chunk_count: int | None = None
    batch_id: UUID | None = None
    source_key: str | None = None  # where the document comes from (None: enqueued before keys)
    version: int | None = None  # the version the job built
    mime_type: str | None = None  # the document's type, when parsing got that far

    @property
    def shown_name(self) -> str:
        return self.source_key or self.source_name
