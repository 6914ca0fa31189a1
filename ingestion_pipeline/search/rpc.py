"""The call of the search RPC (`search_documents`), whose refusals of a bad argument
(SQLSTATE 22023) become one-line IngestErrors."""

from __future__ import annotations

import psycopg
from psycopg.rows import DictRow, class_row

from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.schema_level import probe, require_current
from ingestion_pipeline.errors import IngestError

from .model import Hit, Mode

_PREFIX = "search_documents: "


def search_documents(
    conn: psycopg.Connection[DictRow],
    text: str | None,
    *,
    mode: Mode = "lexical",
    limit: int = 10,
    embedding: list[float] | None = None,
    collections: list[str] | None = None,
) -> list[Hit]:
    """The RPC's hits: `embedding` is the query's vector (vector and hybrid modes)."""
    require_current(probe(conn), "search")
    params = {
        "query": text,
        "collections": list(collections) if collections else None,
        "mode": mode,
        "limit": limit,
        "embedding": embedding,
    }
    try:
        with conn.cursor(row_factory=class_row(Hit)) as cur:
            return cur.execute(query("search_documents"), params).fetchall()
    except psycopg.errors.InvalidParameterValue as exc:
        message = (exc.diag.message_primary or str(exc)).removeprefix(_PREFIX)
        raise IngestError(message) from None
