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
) -> list[Hit]:
    if not text.strip():
        raise IngestError("the search query is empty")
    if mode not in MODES:
        raise IngestError(f"unknown search mode {mode!r}; choose one of: {', '.join(MODES)}")
    if mode == "lexical":
        return lexical_hits(conn, text, limit)
    vector = _query_vector(text, embedder, mode)
    if mode == "vector":
        return vector_hits(conn, vector, limit)
    depth = limit * FUSION_DEPTH
    return reciprocal_rank_fusion([lexical_hits(conn, text, depth), vector_hits(conn, vector, depth)])[:limit]


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
