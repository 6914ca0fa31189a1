"""A vector or hybrid query is embedded by the index's model, or refused in one line.

The index's models are the embedders its live documents' committed generations recorded
(db/embedders.py). The query's embedder must match one of them by name and dimensions
(during `ingest reindex --embeddings` the index holds the old model and the new one, and a
query by either is answered). The version is not compared here: a folder model's version is
the digest of its weights, too slow to compute per query; `ingest reindex --embeddings`
compares it. Hybrid over an index without any vector ranks as lexical does.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ingestion_pipeline.db.embedders import IndexEmbedder, index_embedders, index_has_embedder
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import Embedder, EmbedderRecord, embedder_record, embedder_setting

REINDEX = "`ingest reindex --embeddings`"


def check_query_embedder(
    conn: psycopg.Connection[Any], embedder: Embedder | None, mode: str, collections: list[str] | None
) -> None:
    """IngestError, one line with the fix, unless `embedder` can embed a `mode` query for
    the index of `collections` (None: every collection)."""
    record = embedder_record(embedder, with_version=False) if embedder is not None else None
    dimensions = record.dimensions if record is not None and record.makes_vectors else None
    if record is not None and dimensions is not None and index_has_embedder(conn, record.name, dimensions, collections):
        return  # the common case, found without grouping the whole index
    index = index_embedders(conn, collections)
    if index:  # empty: nothing indexed (or nothing recorded yet), nothing to compare with
        _refuse_unless_it_matches(index, record, mode)


def _refuse_unless_it_matches(index: list[IndexEmbedder], record: EmbedderRecord | None, mode: str) -> None:
    makes_vectors = record is not None and record.makes_vectors
    if record is not None and makes_vectors and any(entry.matches(record.name, record.dimensions) for entry in index):
        return
    made = [entry for entry in index if not entry.without_vectors]
    if not made:
        if mode == "hybrid" and makes_vectors:
            return  # the vector list is empty: hybrid ranks as lexical does
        needs = f"{mode} search: the index" if makes_vectors else f"{mode} search needs an embedder, and the index"
        raise IngestError(
            f"{needs} has no vectors (its documents were indexed with no embedder): set "
            f"INGEST_EMBEDDER (e.g. wordllama) and run {REINDEX}, or search with --mode lexical"
        )
    query = record.describe() if record is not None else "none"
    reindex = f" or run {REINDEX}" if makes_vectors else ""
    raise IngestError(
        f"{mode} search: the index's vectors were made by {_made_by(made)}; this query's embedder is {query}: "
        f"{_fix(made[0])}{reindex} (or search with --mode lexical)"
    )


def _made_by(made: list[IndexEmbedder]) -> str:
    shown = " and ".join(entry.describe() for entry in made[:2])
    return shown + (f" and {len(made) - 2} more" if len(made) > 2 else "")


def _fix(entry: IndexEmbedder) -> str:
    setting = embedder_setting(entry.name)
    return f"set INGEST_EMBEDDER={setting}" if setting else "set INGEST_EMBEDDER to the embedder that made them"
