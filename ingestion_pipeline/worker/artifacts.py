"""One generation's pages, sections and chunks: encoded as COPY rows (in a parsing child, or
in the job's thread), then written with COPY in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import one_row
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.processing import Chunk, ParsedDocument, heading_paths
from ingestion_pipeline.worker.copy_rows import encode_rows, with_leading_columns


@dataclass(frozen=True)
class EncodedArtifacts:
    """A document's rows without their two leading ids (document, generation), which are
    known only when the generation is begun."""

    title: str | None
    mime_type: str
    pages: bytes
    sections: bytes
    chunks: bytes
    chunk_count: int
    with_headings: bool  # the chunk rows carry title and heading path (copy_chunks)
    notes: tuple[str, ...] = ()  # ParsedDocument.notes: kept in the document's metadata


def encode_artifacts(parsed: ParsedDocument, chunks: list[Chunk], *, with_headings: bool) -> EncodedArtifacts:
    pages = encode_rows((p.ordinal, p.text) for p in parsed.pages)
    sections = encode_rows((s.ordinal, s.heading, s.level, s.page_ordinal, s.text) for s in parsed.sections)
    # Title and heading path ride along with every chunk: the search vector weighs them above
    # the text (a trigger builds it; migration weighted_search).
    headings = heading_paths(parsed.sections)
    chunk_rows = (
        (c.ordinal, c.section_ordinal, c.page_ordinal, c.text, c.token_count, c.embedding)
        + (
            (parsed.title, None if c.section_ordinal is None else headings.get(c.section_ordinal))
            if with_headings
            else ()
        )
        for c in chunks
    )
    return EncodedArtifacts(
        parsed.title,
        parsed.mime_type,
        pages,
        sections,
        encode_rows(chunk_rows),
        len(chunks),
        with_headings,
        parsed.notes,
    )


def write_encoded(
    conn: psycopg.Connection[DictRow],
    document_id: UUID,
    generation_id: UUID,
    artifacts: EncodedArtifacts,
    check_lease: Callable[[], None],
) -> None:
    """All rows or none: `check_lease` raising between tables rolls the whole write back."""
    copies = (
        ("copy_pages", artifacts.pages),
        ("copy_sections", artifacts.sections),
        ("copy_chunks" if artifacts.with_headings else "copy_chunks_without_headings", artifacts.chunks),
    )
    with conn.transaction(), conn.cursor() as cur:
        for name, payload in copies:
            check_lease()
            with cur.copy(query(name)) as copy:
                copy.write(with_leading_columns(payload, document_id, generation_id))
        check_lease()


def write_generation(
    conn: psycopg.Connection[DictRow],
    document_id: UUID,
    generation_id: UUID,
    parsed: ParsedDocument,
    chunks: list[Chunk],
    check_lease: Callable[[], None],
    *,
    with_headings: bool | None = None,
) -> None:
    """Encode and write in one call. `with_headings`: whether the database has the chunks'
    title and heading columns (looked up here when not given)."""
    if with_headings is None:
        with_headings = bool(one_row(conn.execute(query("chunks_have_headings")))["present"])
    write_encoded(
        conn, document_id, generation_id, encode_artifacts(parsed, chunks, with_headings=with_headings), check_lease
    )
