"""DOCX (python-docx): paragraphs and tables in document order. A paragraph styled as a
heading ("Heading 1" …, "Title") starts a section; tables become Markdown table text
(tables.py). One page: a DOCX has no pages until it is laid out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from docx import Document
from docx.table import Table

from .document import assemble_flow, sections_at_headings
from .model import ParsedDocument
from .packages import DOCX
from .tables import markdown_table


def parse_docx(stream: IO[bytes]) -> ParsedDocument:
    document = Document(stream)
    titles: list[str] = []  # paragraphs styled "Title", as _blocks meets them
    drafts = sections_at_headings(_blocks(document, titles))
    title = (document.core_properties.title or "").strip() or next(iter(titles), None)
    return assemble_flow(DOCX, drafts, title=title)


def _blocks(document: Any, titles: list[str]) -> Iterator[tuple[str, int | None, bool]]:
    """(text, heading level or None, tight) in document order: tables as Markdown, list
    paragraphs tight."""
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            yield markdown_table([cell.text for cell in row.cells] for row in block.rows), None, False
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        if style == "Title":
            titles.append(text)
        yield text, _heading_level(style), "List" in style


def _heading_level(style: str) -> int | None:
    if style == "Title":
        return 1
    if style.startswith("Heading "):
        number = style.removeprefix("Heading ").strip()
        return int(number) if number.isdigit() else 1
    return None
