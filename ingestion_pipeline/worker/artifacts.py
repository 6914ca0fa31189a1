"""One generation's pages, sections and chunks: encoded as COPY rows (in a parsing child, or
in the job's thread), then written with COPY in one transaction: pages and sections in COPY's
text format, chunks (which carry the vectors) in its binary format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.chunk_table import ChunkTable, chunk_table
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.processing import Chunk, ParsedDocument, heading_paths
from ingestion_pipeline.worker.copy_rows import (
    binary_row,
    encode_rows,
    vector_field,
    with_leading_columns,
    with_leading_fields,
)


@dataclass(frozen=True)
class EncodedArtifacts:
    """A document's rows without their two leading ids (document, generation), which are
    known only when the generation is begun."""

    title: str | None
    mime_type: str
    pages: bytes
    sections: bytes
    chunks: tuple[bytes, ...]  # binary COPY rows (copy_rows.binary_row), one per chunk
    chunk_count: int
    table: ChunkTable
    notes: tuple[str, ...] = ()  # ParsedDocument.notes: kept in the document's metadata
    page_labels: tuple[str, ...] = ()  # ParsedDocument.page_labels: likewise


def encode_artifacts(parsed: ParsedDocument, chunks: list[Chunk], *, table: ChunkTable) -> EncodedArtifacts:
    pages = encode_rows((p.ordinal, p.text) for p in parsed.pages)
    sections = encode_rows((s.ordinal, s.heading, s.level, s.page_ordinal, s.text) for s in parsed.sections)
    # Title and heading path ride along with every chunk: the search vector weighs them above
    # the text (a trigger builds it; migration weighted_search).
    headings = heading_paths(parsed.sections)
    chunk_rows = tuple(
        binary_row(
            (c.ordinal, c.section_ordinal, c.page_ordinal, c.text, c.token_count)
            + (
                (parsed.title, None if c.section_ordinal is None else headings.get(c.section_ordinal))
                if table.headings
                else ()
            ),
            vector_field(c.embedding, pgvector=table.pgvector),
        )
        for c in chunks
    )
    return EncodedArtifacts(
        parsed.title,
        parsed.mime_type,
        pages,
        sections,
        chunk_rows,
        len(chunks),
        table,
        parsed.notes,
        parsed.page_labels,
    )


def write_encoded(
    conn: psycopg.Connection[DictRow],
    document_id: UUID,
    generation_id: UUID,
    artifacts: EncodedArtifacts,
    check_lease: Callable[[], None],
) -> None:
    """All rows or none: `check_lease` raising between tables rolls the whole write back."""
    table = artifacts.table
    copies = (
        ("copy_pages", with_leading_columns(artifacts.pages, document_id, generation_id)),
        ("copy_sections", with_leading_columns(artifacts.sections, document_id, generation_id)),
        (table.copy_query, with_leading_fields(artifacts.chunks, table.fields, document_id, generation_id)),
    )
    with conn.transaction(), conn.cursor() as cur:
        for name, payload in copies:
            check_lease()
            with cur.copy(query(name)) as copy:
                copy.write(payload)
        check_lease()


def write_generation(
    conn: psycopg.Connection[DictRow],
    document_id: UUID,
    generation_id: UUID,
    parsed: ParsedDocument,
    chunks: list[Chunk],
    check_lease: Callable[[], None],
    *,
    table: ChunkTable | None = None,
) -> None:
    """Encode and write in one call. `table`: what the database's chunks take (looked up
    here when not given)."""
    if table is None:
        table = chunk_table(conn)
    write_encoded(conn, document_id, generation_id, encode_artifacts(parsed, chunks, table=table), check_lease)
