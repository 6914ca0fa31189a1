"""Index documents again from their stored bytes: after an upgrade that changes how the index
is built (the weighted search vectors of migration weighted_search), or a parser fix; or,
with `embedder` (`ingest reindex --embeddings`), the documents whose committed generation was
made by another embedder than that one (name, dimensions or version: db/embedders.py).

Each document gets a `reindex` job in one new import batch. Until its new generation
commits, the document stays searchable with the index it has (the queue's rule: an indexed
document stays indexed until the next generation commits). Pages of PAGE_SIZE documents are
enqueued per transaction, so a million documents never hold one long transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db.models import Refusal
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import EmbedderRecord

PAGE_SIZE = 500
FIRST_ID = UUID(int=0)


@dataclass
class ReindexReport:
    batch_id: UUID | None = None  # None when no document was given or found
    outcomes: dict[UUID, str] = field(default_factory=dict)  # reindex_queued | already_queued | not_found

    @property
    def queued(self) -> int:
        return sum(1 for outcome in self.outcomes.values() if outcome == "reindex_queued")

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(self.outcomes.values()))

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_id": str(self.batch_id) if self.batch_id else None,
            "counts": self.counts,
            "documents": {str(doc): outcome for doc, outcome in self.outcomes.items()},
        }


def reindex_documents(
    pool: ConnectionPool[psycopg.Connection[DictRow]],
    document_ids: list[UUID] | None = None,
    *,
    collection: str | None = None,
    batch_name: str | None = None,
    max_attempts: int = 3,
    embedder: EmbedderRecord | None = None,
) -> ReindexReport:
    """`document_ids`, or when None every indexed document of `collection` (None: of
    every collection); with `embedder`, only those whose generation it did not make."""
    name = batch_name or f"reindex {datetime.now(UTC):%Y-%m-%d %H:%M:%S}"
    report = ReindexReport()
    metadata: dict[str, Any] = {"reindex": True}
    if document_ids is not None:
        pages = _pages_of(document_ids)
    elif embedder is not None:
        pages = _indexed_pages(pool, collection, embedder)
        metadata["embedder"] = embedder.as_json()
    else:
        pages = _indexed_pages(pool, collection)
    for page in pages:
        with pool.connection() as conn, conn.transaction():
            rpc = IngestionRpc(conn)
            if report.batch_id is None:
                report.batch_id = rpc.create_batch(name, metadata).batch_id
            for document_id in page:
                result = rpc.enqueue(document_id, batch_id=report.batch_id, kind="reindex", max_attempts=max_attempts)
                report.outcomes[document_id] = "reindex_queued" if result.ok else _outcome(result.reason)
    if report.batch_id is not None and not report.queued:
        IngestionRpc(pool).refresh_batch(report.batch_id)  # no job will ever finish it
    return report


def _outcome(reason: str | None) -> str:
    return Refusal.NOT_FOUND if reason == Refusal.DOCUMENT_NOT_FOUND else reason or "refused"


def _pages_of(document_ids: list[UUID]) -> Iterator[list[UUID]]:
    unique = list(dict.fromkeys(document_ids))
    for at in range(0, len(unique), PAGE_SIZE):
        yield unique[at : at + PAGE_SIZE]


def _indexed_pages(
    pool: ConnectionPool[psycopg.Connection[DictRow]], collection: str | None, embedder: EmbedderRecord | None = None
) -> Iterator[list[UUID]]:
    """Pages of indexed documents; with `embedder`, of those whose generation it did not make."""
    after = FIRST_ID
    params: dict[str, Any] = {"limit": PAGE_SIZE, "collection": collection}
    if embedder is not None:
        params.update(name=embedder.name, dimensions=embedder.dimensions, version=embedder.version)
    while True:
        with pool.connection() as conn:
            statement = query("indexed_document_ids" if embedder is None else "documents_to_reembed")
            rows = conn.execute(statement, {**params, "after": after}).fetchall()
        if not rows:
            return
        yield [row["id"] for row in rows]
        after = rows[-1]["id"]
