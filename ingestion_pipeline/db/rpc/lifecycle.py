"""The document lifecycle: delete a document, cancel an import batch, retry failed jobs.

A delete or a cancel ends the documents' open jobs as `cancelled` in the transaction that
makes the change, so a worker still building one of them is refused by its next fenced
call and by the artifact fence (docs/state-machine.md, "Lifecycle")."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import psycopg

from ingestion_pipeline.db.connection import execute_as_dicts
from ingestion_pipeline.db.models import BatchCancelled, DocumentDeleted, JobsRetried, LiveDocument
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.base import RpcBase
from ingestion_pipeline.db.rpc.sources import SYNC_LEASE_SECONDS


class LifecycleRpc(RpcBase):
    def delete_document(self, document_id: UUID) -> DocumentDeleted:
        """Out of search at once; its bytes and rows go now, or by the guarded cleanup when
        a worker was building it. Deleting again answers `already_deleted`."""
        return self._result(DocumentDeleted, "rpc_delete_document", {"document_id": document_id})

    def delete_vanished(
        self, document_id: UUID, version: int, *, source: str | None = None, token: int | None = None
    ) -> DocumentDeleted | None:
        """A sync's delete of a document its listing no longer holds: refused `version_changed`
        when the document has another version than `version` (enqueued after the listing), and,
        with `source`, `lease_lost` unless the sync's lease `token` still holds the source (the
        lease is renewed in the same transaction). None on a schema without it (the previous
        release's: the caller deletes as that release did)."""
        params = {
            "document_id": document_id,
            "version": version,
            "source": source,
            "token": token,
            "lease_seconds": SYNC_LEASE_SECONDS,
        }
        try:
            return self._result(DocumentDeleted, "rpc_delete_vanished_document", params)
        except psycopg.errors.UndefinedFunction:
            return None

    def cancel_batch(self, batch_id: UUID) -> BatchCancelled:
        """Cancel every open job of the batch and mark it cancelled (it takes no new files);
        indexed documents stay indexed. `nothing_open` says no job of it was pending or
        processing (schemas before …_one_lock_order.sql refuse that case instead)."""
        return self._result(BatchCancelled, "rpc_cancel_batch", {"batch_id": batch_id})

    def retry_failed(self, *, job_ids: Sequence[UUID] | None = None, batch_id: UUID | None = None) -> JobsRetried:
        """Put failed jobs back in the queue: the given ones, a batch's, or (neither given)
        every failed job. Each refused job is listed with its reason."""
        return self._result(
            JobsRetried,
            "rpc_retry_failed",
            {"job_ids": list(job_ids) if job_ids is not None else None, "batch_id": batch_id},
        )

    def live_documents_by_source(self, names: Sequence[str], collection: str | None = None) -> list[LiveDocument]:
        """Documents not deleted whose source name is one of `names`, in `collection` (None:
        in any)."""
        params = {"names": list(names), "collection": collection}
        with self._connection() as conn:
            rows = execute_as_dicts(conn, query("live_documents_by_source"), params).fetchall()
        return [LiveDocument.model_validate(row) for row in rows]

    def live_documents_by_key(self, keys: Sequence[str], collection: str) -> list[LiveDocument]:
        """The live documents of these source keys in `collection`."""
        params = {"keys": list(keys), "collection": collection}
        with self._connection() as conn:
            rows = execute_as_dicts(conn, query("live_documents_by_key"), params).fetchall()
        return [LiveDocument.model_validate(row) for row in rows]
