"""Reading a document as an app's reader would: the collections it may read, and the text of a
document's committed build, through the readers' functions (`readable_collections()`,
`readable_document_sections(id)`, docs/search.md), as the role and claims `reader` names, or as
the connecting role without one. What a reader may not read comes back empty, never refused;
`require_readable` refuses a named collection it may not read as one that does not exist."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row, dict_row

from ingestion_pipeline.db.queries import query
from ingestion_pipeline.errors import UnknownCollection

from .rpc import Reader, as_reader


@dataclass(frozen=True)
class Section:
    """A section of a document's committed build: its heading (None before the first one),
    heading level, page (from 1; None for a format without pages) and text."""

    ordinal: int
    heading: str | None
    level: int | None
    page: int | None
    content: str


def readable_collections(conn: psycopg.Connection[Any], reader: Reader | None = None) -> list[str] | None:
    """The collections `reader` (without one: the connecting role) may read; None: every one."""
    with as_reader(conn, reader), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(query("readable_collections")).fetchone()
    names = row["names"] if row else []
    return None if names is None else list(names)


def readable_among(conn: psycopg.Connection[Any], names: Iterable[str], reader: Reader) -> list[str] | None:
    """Of `names` (none: every collection), those `reader` may read, in order; None when it
    reads every collection (never an app reader's answer)."""
    readable = readable_collections(conn, reader)
    if readable is None:
        return None
    named = list(dict.fromkeys(names))
    return [name for name in named if name in readable] if named else readable


def require_readable(conn: psycopg.Connection[Any], names: Iterable[str], reader: Reader) -> None:
    """UnknownCollection for the first of `names` that `reader` may not read, in the same words
    whether it exists or not (`to_reader`): checked against what the reader may read, never
    against the collections the connecting role sees, so that a reader cannot tell a private
    collection from one that does not exist (SPEC §10). None named: nothing to check."""
    named = list(dict.fromkeys(names))
    if not named:
        return
    readable = readable_among(conn, named, reader)
    unreadable = [] if readable is None else [name for name in named if name not in readable]
    if unreadable:  # the closest names the reader may read, never others
        raise UnknownCollection.among(unreadable[0], readable_collections(conn, reader) or [], to_reader=True)


def readable_sections(conn: psycopg.Connection[Any], document_id: UUID, reader: Reader | None = None) -> list[Section]:
    """The sections of the document's committed build, in order: none when `reader` may not
    read it, it is deleted, or no build of it has committed."""
    with as_reader(conn, reader), conn.cursor(row_factory=class_row(Section)) as cur:
        return cur.execute(query("readable_sections"), {"document_id": document_id}).fetchall()
