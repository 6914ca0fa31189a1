"""Searching the committed index: lexical (full text), vector (embeddings) and hybrid.

Every mode returns one hit per document (its best chunk), best first, over committed
generations of documents that are not deleted.
"""

from __future__ import annotations

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import Embedder, ProcessingError
from ingestion_pipeline.processing.errors import EmbeddingUnavailable

from .fusion import reciprocal_rank_fusion
from .lexical import lexical_hits
from .model import MODES, Hit, Mode
from .vector import vector_hits

__all__ = ["MODES", "Hit", "Mode", "search"]

# Each list fused in hybrid mode is this many times longer than the result, so a page
# ranked low by one method and high by the other still makes it in.
FUSION_DEPTH = 5


def search(
    conn: psycopg.Connection[DictRow],
    text: str,
    *,
    mode: Mode = "lexical",
    limit: int = 10,
    embedder: Embedder | None = None,
    collections: list[str] | None = None,
) -> list[Hit]:
    """One hit per document, best first, of `collections` only (None or empty: of all)."""
    scope = list(collections) if collections else None
    if not text.strip():
        raise IngestError("the search query is empty")
    if mode not in MODES:
        raise IngestError(f"unknown search mode {mode!r}; choose one of: {', '.join(MODES)}")
    if mode == "lexical":
        return lexical_hits(conn, text, limit, collections=scope)
    vector = _query_vector(text, embedder, mode)
    if mode == "vector":
        return vector_hits(conn, vector, limit, collections=scope)
    depth = limit * FUSION_DEPTH
    lists = [lexical_hits(conn, text, depth, collections=scope), vector_hits(conn, vector, depth, collections=scope)]
    return reciprocal_rank_fusion(lists)[:limit]


def _query_vector(text: str, embedder: Embedder | None, mode: str) -> list[float]:
    try:
        vectors = embedder.embed([text]) if embedder is not None else None
    except (ProcessingError, EmbeddingUnavailable) as exc:  # one line, as for a document
        raise IngestError(f"could not embed the query: {exc}") from None
    if not vectors:
        raise IngestError(
            f"{mode} search needs an embedder: set INGEST_EMBEDDER to the one the documents were indexed with"
        )
    return vectors[0]
