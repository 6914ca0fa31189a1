"""Searching the committed index: lexical (full text), vector (embeddings) and hybrid.

Every mode is one call of a search RPC (docs/search.md), the ones apps make too, over
committed generations of documents that are not deleted, of the collections the caller may
read: `search_documents`, one hit per document (its best passage), best first; or
`search_passages`, the best passages, several of one document when they are the best. The
query's vector, for vector and hybrid modes, comes from the embedder here.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import Embedder, ProcessingError, embedder_record
from ingestion_pipeline.processing.errors import EmbeddingUnavailable

from . import rpc
from .index_model import check_query_embedder
from .model import MODES, Hit, Mode, Passage
from .passages import hit_passages, with_page_labels
from .reading import Section, readable_among, readable_collections, readable_sections
from .rpc import Reader
from .timing import observe_searches, report

__all__ = [
    "MODES",
    "Hit",
    "Mode",
    "Passage",
    "Reader",
    "Section",
    "default_mode",
    "hit_passages",
    "observe_searches",
    "readable_collections",
    "readable_sections",
    "search",
    "search_passages",
]


def search(
    conn: psycopg.Connection[Any],
    text: str,
    *,
    mode: Mode | None = None,
    limit: int = 10,
    embedder: Embedder | None = None,
    collections: list[str] | None = None,
    reader: Reader | None = None,
) -> list[Hit]:
    """One hit per document, best first, of `collections` only (None or empty: of all the
    caller may read). `reader`: search as that app reader would (rpc.Reader). `mode` None:
    hybrid when `embedder` makes vectors, else lexical (`default_mode`). Its latency goes to
    the observers of timing.py (the metrics' histogram)."""
    began = time.monotonic()
    mode, vector, model = _query(conn, text, mode, embedder, collections, reader)
    hits = rpc.search_documents(
        conn, text, mode=mode, limit=limit, embedding=vector, embedder=model, collections=collections, reader=reader
    )
    hits = with_page_labels(conn, hits, reader=reader)
    report(mode, time.monotonic() - began)
    return hits


def search_passages(
    conn: psycopg.Connection[Any],
    text: str,
    *,
    mode: Mode | None = None,
    limit: int = 10,
    window: int = 0,
    embedder: Embedder | None = None,
    collections: list[str] | None = None,
    reader: Reader | None = None,
) -> list[Passage]:
    """The best passages, best first, several of one document when they are the best (at most
    200); as `search` otherwise. `window`: the chunks on each side of a passage joined with it
    in its `context` (0-3), so a model sees the whole answer."""
    began = time.monotonic()
    mode, vector, model = _query(conn, text, mode, embedder, collections, reader)
    passages = rpc.search_passages(
        conn,
        text,
        mode=mode,
        limit=limit,
        embedding=vector,
        embedder=model,
        collections=collections,
        reader=reader,
        window=window,
    )
    passages = with_page_labels(conn, passages, reader=reader)
    report(mode, time.monotonic() - began)
    return passages


def _query(
    conn: psycopg.Connection[Any],
    text: str,
    mode: Mode | None,
    embedder: Embedder | None,
    collections: list[str] | None,
    reader: Reader | None,
) -> tuple[Mode, list[float] | None, str | None]:
    """The mode a search runs in, and for vector and hybrid modes the query's vector and
    its model's name, its embedder checked against the index's."""
    if not text.strip():
        raise IngestError("the search query is empty")
    mode = mode or default_mode(embedder)
    if mode not in MODES:
        raise IngestError(f"unknown search mode {mode!r}; choose one of: {', '.join(MODES)}")
    if mode == "lexical":
        return mode, None, None
    checked = _checked_scope(conn, collections, reader)
    if checked != []:  # a reader who may read none of them: no vector to compare, no check
        check_query_embedder(conn, embedder, mode, checked)
    vector = _query_vector(text, embedder, mode)
    model = embedder_record(embedder, with_version=False).name if embedder is not None else None
    return mode, vector, model


def _checked_scope(
    conn: psycopg.Connection[Any], collections: list[str] | None, reader: Reader | None
) -> list[str] | None:
    """The collections whose models a vector query's embedder is checked against: for an app's
    reader, only those it may read (the models of another tenant's collections are not its to
    learn from a refusal); None: every collection."""
    if reader is None:
        return collections
    readable = readable_among(conn, collections or [], reader)
    return collections if readable is None else readable


def default_mode(embedder: Embedder | None) -> Mode:
    """Hybrid where the queries can be embedded: over an index without vectors it ranks as
    lexical does (the vector list is empty)."""
    return "lexical" if embedder is None or embedder.name == "none" else "hybrid"


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
