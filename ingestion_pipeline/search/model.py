"""What a search returns: one hit per document (its best chunk), best first; or passages,
the best chunks of the best documents, several of one document when they are the best."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal
from uuid import UUID

Mode = Literal["lexical", "vector", "hybrid"]
MODES: tuple[Mode, ...] = ("lexical", "vector", "hybrid")


@dataclass(frozen=True)
class Hit:
    document_id: UUID
    title: str  # the document's title, or its source name when it has none
    source_name: str
    source_uri: str | None  # the document's source key (file:///…, s3://…); None before keys
    heading: str | None  # the heading of the section the best chunk is in
    chunk_ordinal: int  # the document's best chunk for this query
    score: float  # comparable within one result list only
    snippet: str
    collection: str = "default"  # the document's collection
    heading_path: str | None = None  # the headings above the best chunk ("Backups › Recovery")
    page: int | None = None  # the best chunk's page, from 1; None for a format without pages
    page_label: str | None = None  # its label where the PDF defines labels ("iv"), else None

    def as_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["document_id"] = str(self.document_id)
        return row


@dataclass(frozen=True)
class Passage(Hit):
    """A passage: a hit whose chunk is the passage itself, with its whole text (`content`) and,
    when a window was asked for, the chunks around it joined in order (`context`; else the
    passage alone)."""

    content: str = ""
    context: str = ""
