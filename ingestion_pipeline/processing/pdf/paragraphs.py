"""A PDF's lines joined back into paragraphs and cut into sections at its headings.

A line runs on into the next when it was wrapped: the next line's first word would not
have fitted at its end (the column's right edge, or ragged-right text's widest line). A line
that ended early (a table row, an address, a paragraph's last line) keeps its line break; a
wider gap than the page's line spacing, a move up the page (the next column), a change of
type size, a list marker, or code in a fixed-pitch font starts a new block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..document import DraftSection
from ..tables import markdown_table
from .headings import Heading
from .lines import Line, Page

_PARAGRAPH_GAP = 1.45  # baseline to baseline, in sizes: more is a new paragraph
_SIZE_CHANGE = 0.1
_CHAR_WIDTH = 0.55  # an average character's width, in sizes
_MIN_ROWS = 2  # lines of cells that make a table
_ROW_GAP = 2.5  # sizes, baseline to baseline: rows further apart are not one table
_COLUMN = 4.0  # points: cells whose left edges are this close are in one column
_LEADER = re.compile(r"^[.·…\s]*$")  # a table of contents' dot leaders
_FEW = 10  # lines: fewer do not show a column's right edge
_LIST_MARKER = re.compile(r"^(?:[•◦▪‣∙·*–—-]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s")


def sections(
    pages: Sequence[Page],
    headings: Mapping[tuple[int, int], Heading],
    skip: set[tuple[int, int]],
    extra: Mapping[int, str],
) -> tuple[list[str], list[DraftSection]]:
    """Each page's text, and the sections: one per heading, cut again at every page break
    so each section names its page. `extra`: text read otherwise (OCR) per page index."""
    texts: list[str] = []
    drafts: list[DraftSection] = []
    heading: Heading | None = None
    for page in pages:
        parts: list[str] = []  # the current section's text on this page
        page_parts: list[str] = []
        edges = _right_edges(page, skip)
        previous: Line | None = None
        if page.index in extra:
            parts.append(extra[page.index])
        number = 0
        while number <= len(page.lines):  # an outline entry may point below the last line
            starts = headings.get((page.index, number))
            if starts is not None:
                _flush(drafts, heading, page.index, parts, page_parts)
                heading, parts, previous = starts, [starts.text], None
                if starts.lines:  # else the title is the outline's, and this line is text
                    number += starts.lines
                    continue
            if number == len(page.lines):
                break
            rows = _table_rows(page, number, headings, skip)
            if len(rows) >= _MIN_ROWS:
                parts.append(("\n\n" if parts else "") + _table(page.lines[number : number + len(rows)]))
                previous, number = None, number + len(rows)
                continue
            line = page.lines[number]
            if (page.index, number) not in skip:
                parts.append(_separator(previous, line, edges) + line.text if parts else line.text)
                previous = line
            number += 1
        _flush(drafts, heading, page.index, parts, page_parts)
        texts.append("\n\n".join(page_parts))
    return texts, drafts


def _flush(
    drafts: list[DraftSection], heading: Heading | None, page: int, parts: list[str], page_parts: list[str]
) -> None:
    text = "".join(parts).strip()
    parts.clear()
    if not text:
        return
    page_parts.append(text)
    drafts.append(DraftSection(heading.text if heading else None, heading.level if heading else 1, page, text))


def _separator(previous: Line | None, line: Line, edges: tuple[float, float, float]) -> str:
    if previous is None:
        return "\n\n"
    size = max(previous.size, line.size)
    if (
        line.baseline > previous.baseline
        or previous.last_baseline - line.baseline > _PARAGRAPH_GAP * size
        or abs(previous.size - line.size) > _SIZE_CHANGE * size
        or previous.bold != line.bold
    ):
        return "\n\n"
    if previous.mono or line.mono or _LIST_MARKER.match(line.text):
        return "\n"
    return " " if _wrapped(previous, line, edges) else "\n"


def _wrapped(previous: Line, line: Line, edges: tuple[float, float, float]) -> bool:
    """Whether `previous` ended because `line`'s first word did not fit on it."""
    middle, left_edge, right_edge = edges
    edge = left_edge if previous.left < middle and previous.right <= middle + previous.size else right_edge
    first_word = line.text.split(" ", 1)[0]
    return previous.right + (len(first_word) + 1) * _CHAR_WIDTH * previous.size >= edge


def _right_edges(page: Page, skip: set[tuple[int, int]]) -> tuple[float, float, float]:
    """The page's middle, and the right edge of the text that ends left of it (a left
    column) and of the rest. A ragged column's edge is its widest lines'."""
    middle = page.width / 2
    left: list[float] = []
    rest: list[float] = []
    for number, line in enumerate(page.lines):
        if (page.index, number) not in skip:
            (left if line.right <= middle + line.size else rest).append(line.right)
    # Few lines do not show where the text's right edge is: margins are usually even.
    mirrored = page.width - min((line.left for line in page.lines), default=0.0)
    if not rest:  # one column of short lines, not a left column
        return middle, max(_edge(left, middle), mirrored), mirrored
    return middle, _edge(left, middle), max(_edge(rest, page.width), mirrored if len(rest) < _FEW else 0.0)


def _edge(rights: list[float], default: float) -> float:
    if not rights:
        return default
    rights.sort()
    return rights[int(len(rights) * 0.9)] if len(rights) >= _FEW else rights[-1]


def _table_rows(
    page: Page, number: int, headings: Mapping[tuple[int, int], Heading], skip: set[tuple[int, int]]
) -> list[Line]:
    """The lines of cells from `number` on, one below the other: a table's rows."""
    rows: list[Line] = []
    for at in range(number, len(page.lines)):
        line = page.lines[at]
        if not line.cells or (page.index, at) in skip or (at > number and (page.index, at) in headings):
            break
        if rows and not 0 < rows[-1].baseline - line.baseline <= _ROW_GAP * line.size:
            break
        rows.append(line)
    return rows


def _table(rows: Sequence[Line]) -> str:
    """The rows as a Markdown table, each cell in the column its left edge stands in."""
    columns: list[float] = []
    for left in sorted(left for row in rows for left in row.cell_lefts):
        if not columns or left - columns[-1] > _COLUMN:
            columns.append(left)
    table: list[list[str]] = []
    for row in rows:
        cells = [""] * len(columns)
        for text, left in zip(row.cells, row.cell_lefts, strict=True):
            if _LEADER.match(text):
                continue
            column = max(i for i, start in enumerate(columns) if start <= left + _COLUMN)
            cells[column] = f"{cells[column]} {text}".strip()
        table.append(cells)
    used = [i for i in range(len(columns)) if any(row[i] for row in table)]
    return markdown_table([[row[i] for i in used] for row in table])
