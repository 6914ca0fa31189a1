"""Which vector search a database supports, and the HNSW index of documents' mean vectors.

Migration pgvector adds `document_chunks.embedding_vector vector` where the server has the
extension. Vector search ranks documents by the query's inner product with their mean chunk
vector (`index_generations.mean_embedding real[]`, set when a generation is committed), and
finds a large scope's nearest documents through an HNSW index of those means. pgvector
indexes only a fixed dimension, and the means have the embedder's, whatever it is. So each
dimension gets its own partial expression index on index_generations,

    ((mean_embedding::vector(n)) vector_ip_ops) WHERE status = 'committed' AND cardinality(mean_embedding) = n

built here, with CREATE INDEX CONCURRENTLY (a plain build, inside a migration, would block
the workers' commits for as long as it runs), by `ingest db migrate` for the configured
embedder's dimension. The search function (search_vector_ranked, migration
20261206000400) repeats the same expression and predicate, which is how the planner finds the
index. One insert per committed document: the index of every chunk vector that releases
before it built cost a drain ~1.9 ms of database CPU per chunk, and is dropped here.
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
    return f"index_generations_mean_hnsw_{dimensions}"


# The table of the chunks' HNSW indexes that releases before migration 20261206000400 built.
CHUNK_INDEX_TABLE = "document_chunks"


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
        try:
            dropped = _drop_chunk_indexes(conn)
            state = conn.execute(query("hnsw_index_state"), {"index": f"public.{name}"}).fetchone()
            if state and state["valid"]:
                return f"vector index: {name} present ({_described(dimensions)}){dropped}"
            if state:  # left INVALID by an interrupted build; IF NOT EXISTS would skip it
                conn.execute(_formatted("drop_index_concurrently", index=sql.Identifier("public", name)))
            conn.execute(_create_statement(column, name, dimensions))
        except psycopg.Error as exc:
            message = (exc.diag.message_primary or str(exc)).strip()
            raise MigrationError(
                f"could not build the vector index {name}: {message}; the migrations are "
                "applied, run `ingest db migrate` again to retry the index"
            ) from None
        return f"vector index: {name} built ({_described(dimensions)}){dropped}"


def _described(dimensions: int) -> str:
    return f"HNSW of the documents' mean vectors, inner product, {dimensions} dimensions"


def _drop_chunk_indexes(conn: psycopg.Connection[DictRow]) -> str:
    """Drop the chunks' HNSW indexes (nothing searches them since migration 20261206000400,
    and each chunk written pays an insert into them); what was dropped, for the line."""
    names = [row["name"] for row in hnsw_indexes(conn) if row["table_name"] == CHUNK_INDEX_TABLE]
    for name in names:
        conn.execute(_formatted("drop_index_concurrently", index=sql.Identifier("public", name)))
    return f"; dropped the chunk vectors' {', '.join(names)} (unused)" if names else ""


def _create_statement(column: VectorColumn, name: str, dimensions: int) -> sql.Composed:
    return _formatted(
        "create_hnsw_index",
        index=sql.Identifier(name),
        vector=sql.Identifier(column.schema, "vector"),
        opclass=sql.Identifier(column.schema, "vector_ip_ops"),
        dimensions=sql.Literal(dimensions),
    )


def _formatted(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(query(name)).format(**parts)


def hnsw_indexes(conn: psycopg.Connection[DictRow]) -> list[dict[str, Any]]:
    """The HNSW indexes of vector search, and any left on chunk vectors: name, table_name
    and validity."""
    return conn.execute(query("hnsw_indexes")).fetchall()


def _version_tuple(version: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in (version or "").split(".")[:2])
    except ValueError:
        return ()
