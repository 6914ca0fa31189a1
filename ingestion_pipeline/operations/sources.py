"""A source's bytes under its key, in one transaction: the enqueue of a version (a new
document, a new version, or nothing) and the write of its bytes. `ingest enqueue` calls it
per file; an app that uploads bytes itself calls `enqueue_bytes` with a key it names
(`app://invoices/2026/0042`, `s3://bucket/key`, …)."""

from __future__ import annotations

import hashlib
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from ingestion_pipeline.db.connection import Database, borrow
from ingestion_pipeline.db.models import VersionEnqueued
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.errors import IngestError


class SourceRefused(IngestError):
    """The database refused the enqueue (its reason in the message); nothing was written."""


@dataclass(frozen=True)
class SourceEnqueued:
    """What the enqueue of a source's bytes did."""

    outcome: str  # new | new_version | unchanged | already_queued | retried | reindex_queued
    document_id: UUID
    version: int | None
    job_id: UUID | None  # the job queued (or, already_queued, the open one)
    superseded_job_id: UUID | None  # an older version's open job, cancelled by this one
    content_sha256: str  # of the bytes enqueued


def enqueue_content(
    conn: psycopg.Connection[Any],
    content: bytes,
    *,
    source_key: str,
    source_name: str,
    collection: str = DEFAULT_COLLECTION,
    batch_id: UUID | None = None,
    mime_type: str | None = None,
    max_attempts: int = 3,
    reindex: bool = False,
    keep_versions: int = 1,
    source_modified_at: datetime | None = None,
    source_etag: str | None = None,
    rpc: IngestionRpc | None = None,
    on_outcome: Callable[[str], None] | None = None,
) -> SourceEnqueued:
    """Enqueue `content` under its key and write it when a job needs it, in the caller's
    transaction on `conn` (which the caller commits). SourceRefused when the database
    refuses it; BatchWasCancelled when `batch_id` was cancelled. `rpc`: a client on `conn`
    to reuse (it looked the schema up once), for callers that enqueue many files.
    `on_outcome` is told the outcome before the bytes are written; what it raises leaves
    them unwritten (the caller then rolls the transaction back)."""
    sha256 = hashlib.sha256(content).hexdigest()
    answer = (rpc or IngestionRpc(conn)).enqueue_version(
        collection=collection,
        source_key=source_key,
        source_name=source_name,
        content_sha256=sha256,
        byte_size=len(content),
        mime_type=mime_type or mimetypes.guess_type(source_name)[0],
        batch_id=batch_id,
        max_attempts=max_attempts,
        reindex=reindex,
        source_modified_at=source_modified_at,
        source_etag=source_etag,
    )
    if not answer.ok or answer.outcome is None or answer.document_id is None:
        raise SourceRefused(f"the database refused it ({answer.reason or 'no outcome'})")
    if on_outcome is not None:
        on_outcome(answer.outcome)
    if answer.store_bytes:
        store_source(conn, answer, content, keep_versions=keep_versions)
    return SourceEnqueued(
        answer.outcome, answer.document_id, answer.version, answer.job_id, answer.superseded_job_id, sha256
    )


def enqueue_bytes(
    db: Database,
    content: bytes,
    *,
    source_key: str,
    source_name: str | None = None,
    collection: str = DEFAULT_COLLECTION,
    batch_id: UUID | None = None,
    mime_type: str | None = None,
    max_attempts: int = 3,
    keep_versions: int = 1,
) -> SourceEnqueued:
    """The Python API's upload: `content` as the latest version of the document `source_key`
    names in `collection`, atomically (the version, its job and its bytes, or nothing). The
    answer's `outcome` is `new`, `new_version`, `unchanged`, `already_queued` or `retried`.
    `source_name` (shown beside the key; default: the key's last segment) and `mime_type`
    (default: guessed from the name) tell the parser what the bytes are."""
    name = source_name or source_key.rstrip("/").rsplit("/", 1)[-1] or source_key
    with borrow(db) as conn, conn.transaction():
        return enqueue_content(
            conn,
            content,
            source_key=source_key,
            source_name=name,
            collection=collection,
            batch_id=batch_id,
            mime_type=mime_type,
            max_attempts=max_attempts,
            keep_versions=keep_versions,
        )


def store_source(
    conn: psycopg.Connection[Any], answer: VersionEnqueued, content: bytes, *, keep_versions: int = 1
) -> None:
    """Write the bytes an enqueue answered `store_bytes` for, in its transaction. A new
    version replaces its predecessor's bytes (version - 1: versions grow by one, and each
    new one stores its bytes), which are kept first when `keep_versions` > 1."""
    keep = keep_versions > 1 and answer.outcome == "new_version" and answer.version is not None
    replaced = answer.version - 1 if keep and answer.version is not None else None
    conn.execute(
        query("store_document_source"),
        {"document_id": answer.document_id, "content": content, "replaced_version": replaced},
    )
