"""What the Python API returns beyond the operations' own results (operations/, worker/,
search/, db/models/, which it returns as they are)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from ingestion_pipeline.db.models import DocumentSummary, DocumentVersion
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.enqueue import EnqueueReport
from ingestion_pipeline.worker import WorkerReport


class DocumentNotFound(IngestError):
    """`Index.show` found no document of that id, or no live one of that key or path."""


@dataclass(frozen=True)
class Document:
    """A document as `ingest show` prints it: what it is now, its versions (newest first)
    and their jobs, the versions whose bytes are kept, and its indexed build's notes."""

    summary: DocumentSummary
    versions: list[DocumentVersion]
    kept_versions: list[int]
    notes: list[str]

    @property
    def document_id(self) -> UUID:
        return self.summary.document_id

    @property
    def title(self) -> str:
        return self.summary.title or self.summary.source_name

    @property
    def indexed_version(self) -> int | None:
        """The version search returns (None: none is indexed yet, or its builds failed)."""
        return self.summary.indexed_version


@dataclass(frozen=True)
class RunReport:
    """`Index.run`: the enqueue, then the drain that indexed it."""

    enqueued: EnqueueReport
    worked: WorkerReport
