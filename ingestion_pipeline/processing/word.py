"""DOCX (python-docx): paragraphs and tables in document order. A paragraph styled as a
heading ("Heading 1" …, "Title") starts a section; tables become Markdown table text
(tables.py). One page: a DOCX has no pages until it is laid out."""

from __future__ import annotations

from typing import IO

from docx import Document
from docx.table import Table

from .document import DraftSection, assemble, join_blocks
from .model import ParsedDocument
from .packages import DOCX
from .tables import markdown_table


def parse_docx(stream: IO[bytes]) -> ParsedDocument:
    document = Document(stream)
    title = (document.core_properties.title or "").strip() or None
    drafts: list[DraftSection] = []
    heading: str | None = None
    level = 1
    blocks: list[tuple[str, bool]] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            blocks.append((markdown_table([cell.text for cell in row.cells] for row in block.rows), False))
            continue
        text = block.text.strip()
        if not text:
            continue
        style = block.style.name if block.style is not None else ""
        heading_level = _heading_level(style or "")
        if heading_level is None:
            blocks.append((text, "List" in (style or "")))
            continue
        if heading is not None or blocks:
            drafts.append(DraftSection(heading, level, 0, join_blocks(blocks)))
        heading, level, blocks = text, heading_level, [(text, False)]  # the heading line opens the text
        title = title or (text if style == "Title" else None)
    if heading is not None or blocks:
        drafts.append(DraftSection(heading, level, 0, join_blocks(blocks)))
    page = "\n\n".join(draft.text for draft in drafts)
    first_heading = next((draft.heading for draft in drafts if draft.heading), None)
    return assemble(DOCX, [page], drafts, title=title or first_heading)


def _heading_level(style: str) -> int | None:
    if style == "Title":
        return 1
    if style.startswith("Heading "):
        number = style.removeprefix("Heading ").strip()
        return int(number) if number.isdigit() else 1
    return None
