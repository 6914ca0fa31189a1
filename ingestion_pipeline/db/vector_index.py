"""Which vector search a database supports, and the HNSW index of chunk vectors.

Migration pgvector adds `document_chunks.embedding_vector vector` where the server has the
extension; pgvector indexes only a fixed dimension, and the column holds the embedder's,
whatever it is. So each dimension gets its own partial expression index,

    ((embedding_vector::vector(n)) vector_cosine_ops) WHERE vector_dims(embedding_vector) = n

built here, with CREATE INDEX CONCURRENTLY (a plain build, inside a migration, would block
the workers' inserts for as long as it runs), by `ingest db migrate` for the configured
embedder's dimension. The search query (db/sql/vector_search.sql) repeats the same
expression and predicate, which is how the planner finds the index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import connect, one_row
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.errors import MigrationError

# pgvector's HNSW limit for the `vector` type; larger vectors are searched without an index.
HNSW_MAX_DIMENSIONS = 2000


@dataclass(frozen=True)
class VectorColumn:
    """The pgvector column of a database: where the extension lives, and its version."""

    schema: str
    version: str | None

    @property
    def iterative_scans(self) -> bool:
        """hnsw.iterative_scan came with pgvector 0.8.0."""
        return _version_tuple(self.version) >= (0, 8)


def vector_column(conn: psycopg.Connection[DictRow]) -> VectorColumn | None:
    """The pgvector column, or None: the database searches real[] exactly."""
    row = conn.execute(query("vector_column")).fetchone()
    return VectorColumn(row["extension_schema"], row["extension_version"]) if row else None


def index_name(dimensions: int) -> str:
    return f"document_chunks_embedding_hnsw_{dimensions}"


def ensure_hnsw_index(url: str, dimensions: int) -> str:
    """Build the HNSW index for `dimensions` unless it exists; one line saying what was done."""
    if dimensions < 1:
        raise ValueError(f"dimensions must be at least 1, got {dimensions}")
    with connect(url) as conn:
        column = vector_column(conn)
        if column is None:
            return "vector search: exact over real[] (no pgvector column on this database)"
        if dimensions > HNSW_MAX_DIMENSIONS:
            return (
                f"vector index: none for {dimensions} dimensions (HNSW indexes at most "
                f"{HNSW_MAX_DIMENSIONS}); vector search scans every vector"
            )
        if not one_row(conn.execute(query("hnsw_access_method")))["present"]:
            return f"vector index: none (pgvector {column.version} has no HNSW; 0.5.0 or later does)"
        name = index_name(dimensions)
        state = conn.execute(query("hnsw_index_state"), {"index": f"public.{name}"}).fetchone()
        if state and state["valid"]:
            return f"vector index: {name} present (HNSW, cosine, {dimensions} dimensions)"
        try:
            if state:  # left INVALID by an interrupted build; IF NOT EXISTS would skip it
                conn.execute(_formatted("drop_index_concurrently", index=sql.Identifier("public", name)))
            conn.execute(_create_statement(column, name, dimensions))
        except psycopg.Error as exc:
            message = (exc.diag.message_primary or str(exc)).strip()
            raise MigrationError(
                f"could not build the vector index {name}: {message}; the migrations are "
                "applied, run `ingest db migrate` again to retry the index"
            ) from None
        return f"vector index: {name} built (HNSW, cosine, {dimensions} dimensions)"


def _create_statement(column: VectorColumn, name: str, dimensions: int) -> sql.Composed:
    return _formatted(
        "create_hnsw_index",
        index=sql.Identifier(name),
        vector=sql.Identifier(column.schema, "vector"),
        opclass=sql.Identifier(column.schema, "vector_cosine_ops"),
        vector_dims=sql.Identifier(column.schema, "vector_dims"),
        dimensions=sql.Literal(dimensions),
    )


def _formatted(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(query(name)).format(**parts)


def hnsw_indexes(conn: psycopg.Connection[DictRow]) -> list[dict[str, Any]]:
    """The HNSW indexes on chunk vectors: name and validity."""
    return conn.execute(query("hnsw_indexes")).fetchall()


def _version_tuple(version: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in (version or "").split(".")[:2])
    except ValueError:
        return ()
