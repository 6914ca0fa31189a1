"""Documents by their source key: the enqueue of a source's bytes (a new document, a new
version, or nothing) and a document's history (`ingest show`). Both need this release's
schema (db/schema_level.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

import psycopg

from ingestion_pipeline.db import schema_level
from ingestion_pipeline.db.connection import execute_as_dicts
from ingestion_pipeline.db.models import DeletedDocument, DocumentHistory, KnownSource, VersionEnqueued
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.base import RpcBase
from ingestion_pipeline.errors import BATCH_CANCELLED_SQLSTATE, BatchWasCancelled

DEFAULT_COLLECTION = "default"


class LiveKey(NamedTuple):
    document_id: UUID
    source_key: str
    version: int  # its latest version when read (what a sync's delete carries)


class DocumentRpc(RpcBase):
    def enqueue_version(
        self,
        *,
        collection: str,
        source_key: str,
        source_name: str,
        content_sha256: str,
        byte_size: int,
        mime_type: str | None = None,
        batch_id: UUID | None = None,
        max_attempts: int = 3,
        reindex: bool = False,
        source_modified_at: datetime | None = None,
        source_etag: str | None = None,
    ) -> VersionEnqueued:
        """When the answer says `store_bytes`, the caller writes the bytes (store_document_source)
        in the same transaction. Raises BatchWasCancelled when `batch_id` was cancelled (the
        transaction is then aborted: roll it back)."""
        schema_level.require_current(self.schema_level, "enqueueing by source key")
        params = {
            "collection": collection,
            "source_key": source_key,
            "source_name": source_name,
            "content_sha256": content_sha256,
            "byte_size": byte_size,
            "mime_type": mime_type,
            "batch_id": batch_id,
            "max_attempts": max_attempts,
            "reindex": reindex,
            "source_modified_at": source_modified_at,
            "source_etag": source_etag,
        }
        try:
            return self._result(VersionEnqueued, "rpc_enqueue_version", params)
        except psycopg.Error as exc:
            if exc.sqlstate == BATCH_CANCELLED_SQLSTATE:
                raise BatchWasCancelled(f"import batch {batch_id} was cancelled: it takes no new files") from None
            raise

    def document_history(
        self, *, document_id: UUID | None = None, collection: str = DEFAULT_COLLECTION, source_key: str | None = None
    ) -> DocumentHistory:
        """A document by id, or the live one of `source_key` in `collection`; `not_found` else."""
        schema_level.require_current(self.schema_level, "reading a document's versions")
        return self._result(
            DocumentHistory,
            "rpc_document_history",
            {"document_id": document_id, "collection": collection, "source_key": source_key},
        )

    def deleted_document(self, collection: str, source_key: str) -> DeletedDocument | None:
        """The latest deleted document of `source_key` in `collection`, if any."""
        with self._connection() as conn:
            row = execute_as_dicts(
                conn, query("deleted_document_of_key"), {"collection": collection, "source_key": source_key}
            ).fetchone()
        return DeletedDocument.model_validate(row) if row else None

    def kept_versions(self, document_id: UUID) -> list[int]:
        """The versions of the document whose bytes are at hand: the latest's, and older ones
        kept (INGEST_KEEP_VERSIONS)."""
        with self._connection() as conn:
            rows = execute_as_dicts(conn, query("kept_versions"), {"document_id": document_id}).fetchall()
        return [int(row["version"]) for row in rows]

    def document_notes(self, document_id: UUID) -> list[str]:
        """The notes of the document's indexed build (processing's ParsedDocument.notes)."""
        with self._connection() as conn:
            row = execute_as_dicts(conn, query("document_notes"), {"document_id": document_id}).fetchone()
        return [str(note) for note in row["notes"]] if row else []

    def version_bytes(self, document_id: UUID, version: int) -> bytes | None:
        """One version's bytes, or None when they are not kept."""
        with self._connection() as conn:
            row = execute_as_dicts(
                conn, query("version_bytes"), {"document_id": document_id, "version": version}
            ).fetchone()
        return bytes(row["content"]) if row else None

    def known_sources(self, collection: str, keys: Sequence[str]) -> dict[str, KnownSource]:
        """The live documents of `keys` in `collection`, by key, with their latest version's
        size, modification time and ETag, and whether its build was cancelled."""
        with self._connection() as conn:
            rows = execute_as_dicts(
                conn, query("known_source_versions"), {"collection": collection, "keys": list(keys)}
            )
            return {row["source_key"]: KnownSource.model_validate(row) for row in rows.fetchall()}

    def live_keys_under(
        self, collection: str, prefix: str, *, before: datetime, after: str = "", limit: int = 1000
    ) -> list[LiveKey]:
        """A page of the live documents of `collection` whose key starts with `prefix` and whose
        latest version was enqueued before `before`, in key order after `after`."""
        params = {
            "collection": collection,
            "prefix": prefix,
            "prefix_end": prefix_end(prefix),
            "before": before,
            "after": after,
            "limit": limit,
        }
        with self._connection() as conn:
            rows = execute_as_dicts(conn, query("live_keys_under_prefix"), params).fetchall()
        return [LiveKey(row["document_id"], row["source_key"], row["version"]) for row in rows]

    def touch_version_source(
        self, document_id: UUID, content_sha256: str, modified_at: datetime | None, etag: str | None
    ) -> None:
        """Record the modification time and ETag under which the latest version's bytes were
        seen again (only if they are still the latest version's)."""
        params = {
            "document_id": document_id,
            "content_sha256": content_sha256,
            "modified_at": modified_at,
            "etag": etag,
        }
        with self._connection() as conn:
            execute_as_dicts(conn, query("touch_version_source"), params)

    def database_now(self) -> datetime:
        """The server's clock (a sync's cutoff is compared with times the server set)."""
        with self._connection() as conn:
            row = execute_as_dicts(conn, query("database_now")).fetchone()
        if row is None:
            raise RuntimeError("now() returned no row")
        now: datetime = row["now"]
        return now


def prefix_end(prefix: str) -> str:
    """The least string in byte order (UTF-8, as collation "C" compares) above every string
    that starts with `prefix`: its last character's successor (a source's prefix ends in
    '/', so '0')."""
    if not prefix:
        raise ValueError("an empty prefix has no end")
    last = ord(prefix[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates are not text: the next character is past them
        last = 0xE000
    if last > 0x10FFFF:
        return prefix_end(prefix[:-1])
    return prefix[:-1] + chr(last)
