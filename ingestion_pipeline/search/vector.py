"""Vector search: the documents whose chunks lie nearest a query vector (cosine).

Two paths, chosen by the schema (docs/vector-search.md):
- "pgvector": the database has `document_chunks.embedding_vector` (migration pgvector ran
  where the extension is available). The nearest chunks come from the HNSW index of the
  query's dimension, over-fetched (a document may own several of them), then grouped;
  fetched again, twice as many, while long documents crowd out the rest.
- "exact": vectors stay in `embedding real[]`; cosine similarity is computed in SQL for
  every committed chunk of the query's dimension. Exact, and linear in the chunks.
Either way: committed generations of non-deleted documents only (the view
committed_document_chunks), one hit per document (its best chunk), best first, and the
score is the cosine similarity of that chunk.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.vector_index import VectorColumn, vector_column

from .model import Hit

VectorPath = Literal["pgvector", "exact"]
# Chunks fetched per hit asked for: a document often owns several of the nearest chunks.
OVER_FETCH = 10
# The most chunks one search walks: pgvector's hnsw.max_scan_tuples (its default) stops an
# iterative scan there anyway. Without iterative scans (pgvector before 0.8), ef_search's
# maximum is the most an index scan returns.
MAX_CANDIDATES = 20_000
# pgvector refuses a larger hnsw.ef_search; 40 is its default.
EF_SEARCH_BOUNDS = (40, 1000)
SNIPPET_WORDS = 30


def vector_search_path(conn: psycopg.Connection[DictRow]) -> VectorPath:
    return "exact" if vector_column(conn) is None else "pgvector"


def vector_hits(
    conn: psycopg.Connection[DictRow], vector: list[float], limit: int, *, collections: list[str] | None = None
) -> list[Hit]:
    """The `limit` documents nearest `vector`, best first, of `collections` only (None: of all)."""
    _check(vector, limit)
    column = vector_column(conn)
    with conn.transaction():  # the SET LOCALs below end with it
        if column is None:
            rows = _exact_rows(conn, vector, limit, collections)
        else:
            rows = _pgvector_rows(conn, column, vector, limit, collections)
    return [_hit(row) for row in rows]


def _check(vector: list[float], limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if not vector:
        raise ValueError("the query vector is empty")
    if not all(math.isfinite(x) for x in vector):
        raise ValueError("the query vector holds a NaN or an infinite value")


def _pgvector_rows(
    conn: psycopg.Connection[DictRow],
    column: VectorColumn,
    vector: list[float],
    limit: int,
    collections: list[str] | None,
) -> list[dict[str, Any]]:
    """Over-fetch the nearest chunks, keep each document's best; when long documents took
    every candidate and fewer than `limit` documents came back, fetch twice as many."""
    conn.execute(query("use_extension_schema"), {"schema": column.schema})
    statement = pgvector_statement(len(vector))
    most = MAX_CANDIDATES if column.iterative_scans else EF_SEARCH_BOUNDS[1]
    candidates = min(limit * OVER_FETCH, most)
    while True:
        _hnsw_settings(conn, column, candidates)
        params = {"query": vector, "candidates": candidates, "limit": limit, "collections": collections}
        rows = conn.execute(statement, params).fetchall()
        hits = [row for row in rows if row["document_id"] is not None]
        if len(hits) >= limit or rows[0]["fetched"] < candidates or candidates >= most:
            return hits
        candidates = min(candidates * 2, most)


def _hnsw_settings(conn: psycopg.Connection[DictRow], column: VectorColumn, candidates: int) -> None:
    ef_search = str(min(max(candidates, EF_SEARCH_BOUNDS[0]), EF_SEARCH_BOUNDS[1]))
    name = "hnsw_settings" if column.iterative_scans else "hnsw_ef_search"
    conn.execute(query(name), {"ef_search": ef_search})


def pgvector_statement(dimensions: int) -> sql.Composed:
    """The pgvector query for one dimension (the tests EXPLAIN it)."""
    return sql.SQL(query("nearest_documents_pgvector")).format(dimensions=sql.Literal(dimensions))


def _exact_rows(
    conn: psycopg.Connection[DictRow], vector: list[float], limit: int, collections: list[str] | None
) -> list[dict[str, Any]]:
    params = {"query": vector, "dimensions": len(vector), "limit": limit, "collections": collections}
    return conn.execute(query("nearest_documents_exact"), params).fetchall()


def _hit(row: dict[str, Any]) -> Hit:
    return Hit(
        document_id=row["document_id"],
        title=row["title"],
        source_name=row["source_name"],
        source_uri=row["source_uri"],
        collection=row["collection"],
        heading=row["heading"],
        chunk_ordinal=row["chunk_ordinal"],
        score=float(row["score"]),
        snippet=snippet(row["content"]),
    )


def snippet(text: str) -> str:
    """The chunk's first words: a vector match has no matched terms to show."""
    words = text.split()
    shown = " ".join(words[:SNIPPET_WORDS])
    return shown + " …" if len(words) > SNIPPET_WORDS else shown
