"""What the Python API returns beyond the operations' own results (operations/, worker/,
search/, db/models/, which it returns as they are)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from ingestion_pipeline.db.models import DocumentSummary, DocumentVersion
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.enqueue import EnqueueReport
from ingestion_pipeline.operations.lookup import shown_key
from ingestion_pipeline.worker import WorkerReport

if TYPE_CHECKING:
    from ingestion_pipeline.db.rpc import IngestionRpc


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


def not_found(rpc: IngestionRpc, document_id: UUID | None, key: str | None, collection: str) -> DocumentNotFound:
    """DocumentNotFound for `Index.show`: it says when the key's document was deleted."""
    if key is None:
        return DocumentNotFound(f"no document {document_id}")
    deleted = rpc.deleted_document(collection, key)
    where = f"{shown_key(key)} in collection {collection!r}"
    if deleted is None:
        return DocumentNotFound(f"no document {where}")
    return DocumentNotFound(
        f"no live document {where}: it was deleted at {deleted.deleted_at:%Y-%m-%d %H:%M:%S %Z} "
        f"(Index.show({str(deleted.document_id)!r}) lists its versions; enqueue the file again to bring it back)"
    )
