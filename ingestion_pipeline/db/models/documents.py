"""Documents by key and their versions (db/rpc/documents.py): what the enqueue of a source's
bytes under its key did, a version and its jobs, a document's summary and history (`ingest
show`), and the known sources a sync compares its listing with."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ingestion_pipeline.db.models.refusals import RpcResult

# -- documents by key, and their versions (db/rpc/batches.py, db/rpc/lifecycle.py) -------------


EnqueueOutcome = Literal["new", "new_version", "unchanged", "already_queued", "retried", "reindex_queued"]


class VersionEnqueued(RpcResult):
    """What the enqueue of a source's bytes under its key did (enqueue_document_version)."""

    outcome: EnqueueOutcome | None = None
    document_id: UUID | None = None
    version: int | None = None
    job_id: UUID | None = None
    superseded_job_id: UUID | None = None  # the older version's open job, cancelled
    adopted: bool = False  # a document from before keys took this key as its version 1
    store_bytes: bool = False  # the caller writes the bytes in the same transaction


class VersionJob(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    job_id: UUID
    kind: str
    status: str
    stage: str
    attempt_count: int
    batch_id: UUID | None = None
    error_message: str | None = None
    created_at: datetime
    completed_at: datetime | None = None


class DocumentVersion(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    version: int
    content_sha256: str
    byte_size: int
    mime_type: str | None = None
    source_name: str
    source_modified_at: datetime | None = None
    source_etag: str | None = None
    enqueued_at: datetime
    # indexed | replaced | building | queued | failed | superseded | cancelled (None: no job)
    outcome: str | None = None
    error_message: str | None = None
    jobs: list[VersionJob] = []


class DocumentSummary(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    document_id: UUID
    collection: str
    source_key: str | None = None
    source_name: str
    title: str | None = None
    status: str
    version: int | None = None
    indexed_version: int | None = None
    byte_size: int
    chunk_count: int = 0
    created_at: datetime
    deleted_at: datetime | None = None


class KnownSource(BaseModel):
    """What a live document's latest version was enqueued from (a sync compares its listing
    with it), and whether that version's build was cancelled (the sync queues it again)."""

    model_config = ConfigDict(frozen=True)

    source_key: str
    document_id: UUID
    version: int
    byte_size: int
    source_modified_at: datetime | None = None
    source_etag: str | None = None
    build_cancelled: bool = False  # not indexed, nothing open, its last job cancelled: queue it again
    content_sha256: str | None = None  # the latest version's bytes


class DeletedDocument(BaseModel):
    """The latest deleted document of a key (`ingest show` of a key no live document has)."""

    model_config = ConfigDict(frozen=True)

    document_id: UUID
    deleted_at: datetime


class DocumentHistory(RpcResult):
    """`ingest show`: a document and its versions, newest first."""

    document: DocumentSummary | None = None
    versions: list[DocumentVersion] = []
