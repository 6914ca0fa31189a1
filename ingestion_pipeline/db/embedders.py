"""Which embedders made the index's vectors: each live document's committed generation
records the embedder's name, dimensions and version (migration
…_generations_record_their_embedder.sql). Vector and hybrid search compare the query's
embedder with them (search/index_model.py), `ingest health` reports missing and mixed
vectors (health/vectors.py), `ingest reindex --embeddings` re-embeds the documents
whose generation differs from the configured embedder (operations/reindex.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import class_row

from ingestion_pipeline.db.connection import execute_as_dicts
from ingestion_pipeline.db.queries import query


@dataclass(frozen=True)
class IndexEmbedder:
    """One (name, dimensions, version) of the index and how many live documents have it.
    `recorded` False: a generation committed before the record (its name from the
    document's metadata, or None; dimensions unknown)."""

    name: str | None
    dimensions: int | None
    version: str | None
    recorded: bool
    documents: int

    @property
    def has_vectors(self) -> bool:
        return self.recorded and self.dimensions is not None and self.name != "none"

    @property
    def unknown(self) -> bool:
        """Committed before the record, by an embedder that may have made vectors."""
        return not self.recorded and self.name != "none"

    @property
    def without_vectors(self) -> bool:
        return not self.has_vectors and not self.unknown

    def matches(self, name: str, dimensions: int | None) -> bool:
        """Whether vectors of embedder `name` with `dimensions` (None: not known yet) compare
        with this one's. An unrecorded generation matches its name (an endpoint's older
        records named the protocol, `openai`, not the model) or, nameless, anything."""
        if self.unknown:
            return self.name is None or name == self.name or name.startswith(f"{self.name}:")
        return self.has_vectors and name == self.name and dimensions in (None, self.dimensions)

    def describe(self) -> str:
        """e.g. `wordllama-l2-supercat-256 (256 dims)`."""
        name = self.name or "an unrecorded embedder"
        if self.has_vectors:
            return f"{name} ({self.dimensions} dims)"
        return f"{name} (dimensions not recorded)" if self.unknown else f"{name} (no vectors)"


def index_has_embedder(
    conn: psycopg.Connection[Any], name: str, dimensions: int, collections: list[str] | None = None
) -> bool:
    """Whether some live document of `collections` has vectors made by `name` with
    `dimensions` (stops at the first). False on a schema before the record."""
    params = {"collections": list(collections) if collections else None, "name": name, "dimensions": dimensions}
    try:
        with conn.transaction():
            row = execute_as_dicts(conn, query("index_has_embedder"), params).fetchone()
    except psycopg.errors.UndefinedColumn:
        return False
    return bool(row and row["found"])


def index_embedders(conn: psycopg.Connection[Any], collections: list[str] | None = None) -> list[IndexEmbedder]:
    """The index's embedders over the live documents of `collections` (None or empty: every
    collection), most documents first. Empty on a schema before the record."""
    params = {"collections": list(collections) if collections else None}
    try:
        with conn.transaction(), conn.cursor(row_factory=class_row(IndexEmbedder)) as cur:
            return cur.execute(query("index_embedders"), params).fetchall()
    except psycopg.errors.UndefinedColumn:  # the previous release's schema: nothing recorded
        return []
