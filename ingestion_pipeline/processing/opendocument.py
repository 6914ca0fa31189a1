"""OpenDocument (ODT, ODS, ODP): the package's content.xml read with defusedxml's
ElementTree (a DTD or entity in it is refused: no entity bomb expands).

Measured before choosing: odfpy, the usual library, parses every part of the package and
rejects the styles.xml pandoc 2.17 writes (a namespace declared twice), so it cannot read
pandoc's ODT at all; the text lives in content.xml alone.

- ODT: `text:h` headings (their outline level) start sections; paragraphs and list items
  in order; tables as Markdown table text. One page: text has no pages until laid out.
- ODS: each sheet a page and a section headed by its name, rows as a Markdown table under
  the first row (repeated rows and columns expanded, with a bound).
- ODP: each slide a page and a section headed by its title frame, then its other frames
  (tables as Markdown) and its speaker notes.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from typing import IO
from xml.etree.ElementTree import Element

from defusedxml import ElementTree

from .document import DraftSection, assemble, assemble_flow, join_blocks, sections_at_headings
from .model import ParsedDocument
from .packages import ODP, ODS, ODT
from .tables import markdown_table

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_MAX_REPEAT = 100  # a row or cell repeated more than this is written only this often
_SKIPPED = {"tracked-changes", "sequence-decls", "variable-decls", "user-field-decls", "soft-page-break"}


def _tag(prefix: str, name: str) -> str:
    return f"{{{_NS[prefix]}}}{name}"


def _attr(element: Element, prefix: str, name: str) -> str | None:
    return element.get(_tag(prefix, name))


def parse_opendocument(stream: IO[bytes], mime_type: str) -> ParsedDocument:
    with zipfile.ZipFile(stream) as archive:
        content = ElementTree.fromstring(archive.read("content.xml"))
        title = _meta_title(archive)
    body = content.find("office:body", _NS)
    if body is None:
        raise ValueError("content.xml has no office:body")
    if mime_type == ODS:
        return _spreadsheet(body, title)
    if mime_type == ODP:
        return _presentation(body, title)
    return _text_document(body, title)


def _meta_title(archive: zipfile.ZipFile) -> str | None:
    if "meta.xml" not in archive.namelist():
        return None
    title = ElementTree.fromstring(archive.read("meta.xml")).find(".//dc:title", _NS)
    return (title.text or "").strip() or None if title is not None else None


# -- text -----------------------------------------------------------------------------


def _text_document(body: Element, title: str | None) -> ParsedDocument:
    return assemble_flow(ODT, sections_at_headings(_flow(body)), title=title)


def _flow(element: Element) -> Iterator[tuple[str, int | None, bool]]:
    """(text, heading level or None, tight) in document order: list items tight, tables as
    Markdown."""
    for child in element:
        name = child.tag.rpartition("}")[2]
        if name in _SKIPPED:
            continue
        if child.tag == _tag("text", "h"):
            level = _attr(child, "text", "outline-level") or "1"
            yield _text(child), min(int(level), 6) if level.isdigit() else 1, False
        elif child.tag == _tag("text", "p"):
            yield _text(child), None, False
        elif child.tag == _tag("text", "list-item"):
            yield " ".join(_text(p) for p in child.iter(_tag("text", "p"))), None, True
        elif child.tag == _tag("table", "table"):
            yield markdown_table(_rows(child)), None, False
        else:  # sections, lists, frames, …: their contents in order
            yield from _flow(child)


def _text(element: Element) -> str:
    return _inline(element).strip()


def _inline(element: Element) -> str:
    """An element's text, with ODF's spacing elements (text:s, text:tab, text:line-break)."""
    parts = [element.text or ""]
    for child in element:
        if child.tag == _tag("text", "s"):
            parts.append(" " * int(_attr(child, "text", "c") or "1"))
        elif child.tag == _tag("text", "tab"):
            parts.append("\t")
        elif child.tag == _tag("text", "line-break"):
            parts.append("\n")
        elif child.tag != _tag("office", "annotation"):
            parts.append(_inline(child))
        parts.append(child.tail or "")
    return "".join(parts)


# -- tables ---------------------------------------------------------------------------


def _rows(table: Element) -> Iterator[list[str]]:
    for row in table.iter(_tag("table", "table-row")):
        cells: list[str] = []
        for cell in row:
            if cell.tag not in (_tag("table", "table-cell"), _tag("table", "covered-table-cell")):
                continue
            value = "\n".join(_text(p) for p in cell.iter(_tag("text", "p")))
            cells.extend([value] * _repeat(cell, "number-columns-repeated", value))
        repeat = _repeat(row, "number-rows-repeated", "".join(cells))
        for _ in range(repeat):
            yield cells


def _repeat(element: Element, attribute: str, value: str) -> int:
    """How often to write a repeated row or cell: an empty one once (sheets repeat empty
    cells to the millionth row), a filled one at most _MAX_REPEAT times."""
    count = _attr(element, "table", attribute)
    if not value or count is None or not count.isdigit():
        return 1
    return min(int(count), _MAX_REPEAT)


def _spreadsheet(body: Element, title: str | None) -> ParsedDocument:
    pages: list[str] = []
    drafts: list[DraftSection] = []
    for index, sheet in enumerate(body.iter(_tag("table", "table"))):
        table = markdown_table(_rows(sheet))
        pages.append(table)
        drafts.append(DraftSection(_attr(sheet, "table", "name") or f"Sheet {index + 1}", 1, index, table))
    return assemble(ODS, pages, drafts, title=title, title_from_first_line=False)


# -- presentations --------------------------------------------------------------------


def _presentation(body: Element, title: str | None) -> ParsedDocument:
    pages: list[str] = []
    drafts: list[DraftSection] = []
    for index, slide in enumerate(body.iter(_tag("draw", "page"))):
        heading = ""
        blocks: list[str] = []
        for frame in slide.findall("draw:frame", _NS) + slide.findall("draw:g//draw:frame", _NS):
            text = _frame_text(frame)
            if _attr(frame, "presentation", "class") == "title" and not heading:
                heading = " ".join(text.split())
            elif text:
                blocks.append(text)
        notes = slide.find("presentation:notes", _NS)
        if notes is not None:
            blocks.extend(text for frame in notes.iter(_tag("draw", "frame")) if (text := _frame_text(frame)))
        text = join_blocks([(block, False) for block in blocks])
        pages.append("\n\n".join(part for part in (heading, text) if part))
        drafts.append(DraftSection(heading or f"Slide {index + 1}", 1, index, pages[-1]))
    first = next((draft.heading for draft in drafts if draft.heading and not draft.heading.startswith("Slide ")), None)
    return assemble(ODP, pages, drafts, title=title or first, title_from_first_line=False)


def _frame_text(frame: Element) -> str:
    table = frame.find("table:table", _NS)
    if table is not None:
        return markdown_table(_rows(table))
    return "\n".join(text for p in frame.iter(_tag("text", "p")) if (text := _text(p)))
