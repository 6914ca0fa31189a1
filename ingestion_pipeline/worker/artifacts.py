"""Write one generation's pages, sections and chunks with COPY, in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import psycopg

from ingestion_pipeline.db.queries import query
from ingestion_pipeline.processing import Chunk, ParsedDocument, heading_paths


def write_generation(conn: psycopg.Connection, document_id: UUID, generation_id: UUID,
                     parsed: ParsedDocument, chunks: list[Chunk], check_lease: Callable[[], None], *,
                     with_headings: bool | None = None) -> None:
    """All rows or none: `check_lease` raising between tables rolls the whole write back.
    `with_headings`: whether the database has the chunks' title and heading columns (looked
    up here when not given; the worker passes what its client looked up once)."""
    if with_headings is None:
        with_headings = conn.execute(query("chunks_have_headings")).fetchone()["present"]
    with conn.transaction(), conn.cursor() as cur:
        check_lease()
        with cur.copy(query("copy_pages")) as copy:
            copy.set_types(["uuid", "uuid", "int4", "text"])
            for page in parsed.pages:
                copy.write_row((document_id, generation_id, page.ordinal, page.text))
        check_lease()
        with cur.copy(query("copy_sections")) as copy:
            copy.set_types(["uuid", "uuid", "int4", "text", "int4", "int4", "text"])
            for section in parsed.sections:
                copy.write_row((document_id, generation_id, section.ordinal, section.heading, section.level,
                                section.page_ordinal, section.text))
        check_lease()
        # Title and heading path ride along with every chunk: the search vector weighs
        # them above the text (a trigger builds it; migration weighted_search).
        headings = heading_paths(parsed.sections)
        types = ["uuid", "uuid", "int4", "int4", "int4", "text", "int4", "float4[]"]
        with cur.copy(query("copy_chunks" if with_headings else "copy_chunks_without_headings")) as copy:
            copy.set_types(types + ["text", "text"] if with_headings else types)
            for chunk in chunks:
                row = (document_id, generation_id, chunk.ordinal, chunk.section_ordinal, chunk.page_ordinal,
                       chunk.text, chunk.token_count, chunk.embedding)
                copy.write_row(row + (parsed.title, headings.get(chunk.section_ordinal)) if with_headings else row)
        check_lease()
