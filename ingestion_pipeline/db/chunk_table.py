"""What the database's document_chunks takes, which decides how a worker writes its chunks:
looked up once per worker (`RpcClient.chunk_table`), as the schema level is."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import execute_as_dicts, one_row
from ingestion_pipeline.db.queries import query


@dataclass(frozen=True)
class ChunkTable:
    """Title and heading columns (migration weighted_search; an older database gets its chunks
    without them), and pgvector's `embedding_vector` (migration pgvector, where the extension
    is), which takes the vectors straight, rather than `embedding real[]`, whose trigger would
    move them there."""

    headings: bool = True
    pgvector: bool = False

    @property
    def copy_query(self) -> str:
        """The named binary COPY of chunks (its vector column last)."""
        if not self.headings:
            return "copy_chunks_without_headings"
        return "copy_chunk_vectors" if self.pgvector else "copy_chunks"

    @property
    def fields(self) -> int:
        """A chunk row's fields after its two leading ids (document, generation)."""
        return 8 if self.headings else 6


DEFAULT_CHUNK_TABLE = ChunkTable()  # this release's schema without pgvector


def chunk_table(conn: psycopg.Connection[DictRow]) -> ChunkTable:
    row = one_row(execute_as_dicts(conn, query("chunk_columns")))
    headings = bool(row["headings"])
    # The pgvector migration comes after the headings one: without headings, the real[] path
    # (copy_chunks_without_headings) is the only one there is.
    return ChunkTable(headings=headings, pgvector=headings and bool(row["embedding_vector"]))
