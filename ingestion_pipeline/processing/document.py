"""Turn a parser's raw pages and sections into a ParsedDocument with the shared rules:
whitespace normalised, empty pages and sections dropped, ordinals dense."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import Page, ParsedDocument, Section
from .text import clean_title, first_short_line, normalize


@dataclass
class DraftSection:
    """A section as a parser found it: raw text, and the index of its raw page."""

    heading: str | None
    level: int
    page_index: int | None
    text: str


def assemble(
    mime_type: str,
    pages: list[str],
    sections: list[DraftSection],
    *,
    title: str | None,
    title_from_first_line: bool = True,
    notes: list[str] | tuple[str, ...] = (),
    keep_empty_pages: bool = False,
    page_labels: list[str] | tuple[str, ...] = (),
) -> ParsedDocument:
    """`keep_empty_pages`: every page keeps its ordinal (a PDF's page numbers are its pages'
    names); otherwise empty pages are dropped and the rest numbered densely."""
    out_pages, page_ordinals = _pages(pages, keep_empty_pages)
    out_sections: list[Section] = []
    for draft in sections:
        text = normalize(draft.text)
        if not text:
            continue
        page = page_ordinals.get(draft.page_index) if draft.page_index is not None else None
        heading = clean_title(draft.heading)
        out_sections.append(Section(len(out_sections), heading, draft.level, page, text))
    title = clean_title(title)
    first_page = next((page.text for page in out_pages if page.text), None)
    if title is None and title_from_first_line and first_page:
        title = first_short_line(first_page)
    return ParsedDocument(
        title=title,
        mime_type=mime_type,
        pages=out_pages,
        sections=out_sections,
        notes=tuple(notes),
        page_labels=tuple(page_labels),
    )


def _pages(raw_pages: list[str], keep_empty: bool) -> tuple[list[Page], dict[int, int]]:
    """Surviving pages renumbered 0..n-1, and raw index -> new ordinal for sections."""
    pages: list[Page] = []
    ordinals: dict[int, int] = {}
    for index, raw in enumerate(raw_pages):
        text = normalize(raw)
        if text or keep_empty:
            ordinals[index] = len(pages)
            pages.append(Page(len(pages), text))
    return pages, ordinals


def sections_at_headings(blocks: Iterable[tuple[str, int | None, bool]]) -> list[DraftSection]:
    """Flowing text (a DOCX, an ODT: one page) cut into sections at its headings. Each block
    is (text, heading level or None, tight); a section's text starts with its heading line."""
    drafts: list[DraftSection] = []
    heading: str | None = None
    level = 1
    lines: list[tuple[str, bool]] = []
    for text, heading_level, tight in blocks:
        if heading_level is None:
            lines.append((text, tight))
            continue
        if heading is not None or lines:
            drafts.append(DraftSection(heading, level, 0, join_blocks(lines)))
        heading, level, lines = text, heading_level, [(text, False)]
    if heading is not None or lines:
        drafts.append(DraftSection(heading, level, 0, join_blocks(lines)))
    return drafts


def assemble_flow(mime_type: str, drafts: list[DraftSection], *, title: str | None) -> ParsedDocument:
    """One page of sections_at_headings' sections; the title, else the first heading."""
    page = "\n\n".join(draft.text for draft in drafts)
    first_heading = next((draft.heading for draft in drafts if draft.heading), None)
    return assemble(mime_type, [page], drafts, title=title or first_heading)


def join_blocks(blocks: list[tuple[str, bool]]) -> str:
    """Join text blocks: a blank line between paragraphs, one newline between lines of a
    list or table (blocks flagged `tight`), so list items stay one per line."""
    out: list[str] = []
    previous_tight = False
    for text, tight in blocks:
        if not text.strip():
            continue
        if out:
            out.append("\n" if tight and previous_tight else "\n\n")
        out.append(text)
        previous_tight = tight
    return "".join(out)
