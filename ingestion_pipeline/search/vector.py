"""Vector search: the documents whose chunks lie nearest a query vector (cosine), through
the search RPC's vector mode (search_vector_hits, in SQL).

Two paths, chosen by the schema (docs/vector-search.md):
- "pgvector": the database has `document_chunks.embedding_vector` (migration pgvector ran
  where the extension is available). A reader's scope is scored exactly, whatever its size, so
  that what it gets and what it costs depend only on what it may read; a caller who reads
  every collection (the owner), over more than 2,000 documents, finds its nearest documents
  through the HNSW index of the documents' mean vectors of the query's dimension (the exact
  path answers when that scan comes back short).
- "exact": vectors stay in `embedding real[]`; each live document of the scope is scored in SQL.
Either way: committed generations of non-deleted documents only, whose vectors the query's
model made (`embedder`, the name generations record), one hit per document, best
first, scored by the query's inner product with the document's mean chunk vector over the
query's norm (the mean cosine of its chunks, for unit vectors), and shown by its most similar chunk.
"""

from __future__ import annotations

import math
from typing import Literal

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.vector_index import vector_column

from .model import Hit
from .rpc import search_documents

VectorPath = Literal["pgvector", "exact"]


def vector_search_path(conn: psycopg.Connection[DictRow]) -> VectorPath:
    return "exact" if vector_column(conn) is None else "pgvector"


def vector_hits(
    conn: psycopg.Connection[DictRow],
    vector: list[float],
    limit: int,
    *,
    embedder: str,
    collections: list[str] | None = None,
) -> list[Hit]:
    """The `limit` documents nearest `vector`, best first, of `collections` only (None: of all),
    among those whose vectors the model `embedder` (its name as generations record it) made."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if not vector:
        raise ValueError("the query vector is empty")
    if not all(math.isfinite(x) for x in vector):
        raise ValueError("the query vector holds a NaN or an infinite value")
    return search_documents(
        conn, None, mode="vector", limit=limit, embedding=vector, embedder=embedder, collections=collections
    )
