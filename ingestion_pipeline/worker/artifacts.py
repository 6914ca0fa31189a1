"""Write one generation's pages, sections and chunks with COPY, in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import psycopg

from ingestion_pipeline.db.queries import query
from ingestion_pipeline.processing import Chunk, ParsedDocument


def write_generation(conn: psycopg.Connection, document_id: UUID, generation_id: UUID,
                     parsed: ParsedDocument, chunks: list[Chunk], check_lease: Callable[[], None]) -> None:
    """All rows or none: `check_lease` raising between tables rolls the whole write back."""
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
        with cur.copy(query("copy_chunks")) as copy:
            copy.set_types(["uuid", "uuid", "int4", "int4", "int4", "text", "int4", "float4[]"])
            for chunk in chunks:
                copy.write_row((document_id, generation_id, chunk.ordinal, chunk.section_ordinal,
                                chunk.page_ordinal, chunk.text, chunk.token_count, chunk.embedding))
        check_lease()
