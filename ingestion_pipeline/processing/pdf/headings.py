"""Which lines of a PDF are headings, and of what level.

From the outline (bookmarks) where the PDF has one: each entry names a page and a height;
the heading is the line there whose words are the entry's (numbering aside, and across two
lines where the heading wraps). An entry whose words are not printed there still opens a
section, at that height, under the entry's title.

From typography where it has none, and for the levels the outline does not reach: a short
line set apart from the body (larger than the body's size, or bold and numbered like
"2.1." or standing alone) is a heading; larger type is a higher level, and numbering
("2.1.3") says the depth where there is some.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .lines import Line, Page

_WORDS = re.compile(r"[^\w]+")
_NUMBERING = re.compile(r"^(?:(?:chapter|section|appendix|part)\s+)?(?:\d+|[A-Z])(?:\.\d+)*\.?\s+(?=\S)", re.IGNORECASE)
_NUMBER_DEPTH = re.compile(r"^(\d+(?:\.\d+)*)\.?\s")
LARGER = 1.12  # a heading's type is this much larger than the body's
_SET_APART = 1.3  # a bold heading's gap above, in lines of body text
_MAX_HEADING_CHARS = 150
_MAX_BOLD_HEADING_CHARS = 90
_MAX_HEADING_LINES = 3
_SEARCH_LINES = 12  # lines below an outline entry's height searched for its words
_MAX_LEVEL = 6


@dataclass(frozen=True)
class OutlineEntry:
    level: int  # 1 for the outline's top entries
    title: str
    page: int  # 0-based
    top: float | None  # the height the entry points at, None for the page's top


@dataclass(frozen=True)
class Heading:
    text: str
    level: int
    lines: int  # lines of the page the heading takes (0: the outline's title, not printed)


def body_size(pages: Sequence[Page]) -> float:
    """The size most of the text is set in."""
    sizes: Counter[float] = Counter()
    for page in pages:
        for line in page.lines:
            sizes[round(line.size * 2) / 2] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def find_headings(
    pages: Sequence[Page], outline: Sequence[OutlineEntry], skip: set[tuple[int, int]], body: float
) -> dict[tuple[int, int], Heading]:
    """(page index, line index) -> the heading that starts there. Outline entries without a
    printed line start at the first line below their height (its index) with lines=0."""
    found = _from_outline(pages, outline, skip)
    styles = {_style(pages[i].lines[n]): h.level for (i, n), h in found.items() if h.lines}
    typographic = _from_typography(pages, skip | set(found), body, styles, outlined=bool(outline))
    taken = {(i, n + k) for (i, n), h in found.items() for k in range(h.lines)}
    # Before the outline's first entry (a title page: its authors in a heading's type) only
    # the title is a heading.
    start = min((entry.page for entry in outline), default=0)
    found.update({key: h for key, h in typographic.items() if key not in taken and key[0] >= start})
    title = title_line(pages, body, skip)
    if title is not None and not any(
        i == title[0] and n <= title[1] < n + max(h.lines, 1) for (i, n), h in found.items()
    ):
        found[title] = Heading(pages[title[0]].lines[title[1]].text, 1, 1)
    return found


def _covers(key: tuple[int, int], heading: Heading, line: tuple[int, int]) -> bool:
    return key[0] == line[0] and key[1] <= line[1] < key[1] + max(heading.lines, 1)


def title_line(pages: Sequence[Page], body: float, skip: set[tuple[int, int]]) -> tuple[int, int] | None:
    """The largest line of the first page with text, when it is larger than the body."""
    page = next((page for page in pages if page.lines), None)
    kept = [n for n in range(len(page.lines)) if (page.index, n) not in skip] if page else []
    if page is None or not kept:
        return None
    number = max(kept, key=lambda n: page.lines[n].size)
    line = page.lines[number]
    return (page.index, number) if line.size >= body * LARGER and _could_head(line, body) else None


@functools.lru_cache(maxsize=4096)  # the lines near an outline entry are tried by its neighbours too
def _key(text: str) -> str:
    """Words only, numbering dropped: "2.3. Simple parsing" and "Simple parsing" match."""
    return _WORDS.sub("", _NUMBERING.sub("", text.strip())).lower()


def _style(line: Line) -> tuple[float, bool]:
    return round(line.size * 2) / 2, line.bold


def _from_outline(
    pages: Sequence[Page], outline: Sequence[OutlineEntry], skip: set[tuple[int, int]]
) -> dict[tuple[int, int], Heading]:
    found: dict[tuple[int, int], Heading] = {}
    for entry in outline:
        if not 0 <= entry.page < len(pages):
            continue
        lines = pages[entry.page].lines
        start = _first_below(lines, entry.top)
        printed = _printed(lines, start, entry.title, skip, entry.page)
        if printed is not None:
            number, count = printed
            text = " ".join(lines[number + k].text for k in range(count))
            found[(entry.page, number)] = Heading(text, min(entry.level, _MAX_LEVEL), count)
        elif (entry.page, start) not in found:
            found[(entry.page, start)] = Heading(entry.title, min(entry.level, _MAX_LEVEL), 0)
    return found


def _first_below(lines: Sequence[Line], top: float | None) -> int:
    if top is None:
        return 0
    for number, line in enumerate(lines):
        # A destination points at the heading's top: its baseline is a line lower.
        if line.baseline <= top + 1:
            return number
    return len(lines)


def _printed(
    lines: Sequence[Line], start: int, title: str, skip: set[tuple[int, int]], page: int
) -> tuple[int, int] | None:
    """(line index, line count) of the title's printed lines from `start` on."""
    wanted = _key(title)
    if not wanted:
        return None
    for number in range(max(0, start - 1), min(len(lines), start + _SEARCH_LINES)):
        if (page, number) in skip:
            continue
        words = ""
        for count in range(1, _MAX_HEADING_LINES + 1):
            if number + count > len(lines):
                break
            words = _key(" ".join(line.text for line in lines[number : number + count]))
            if words == wanted:
                return number, count
            if not words or not wanted.startswith(words):
                break
    return None


def _from_typography(
    pages: Sequence[Page],
    skip: set[tuple[int, int]],
    body: float,
    styles: dict[tuple[float, bool], int],
    *,
    outlined: bool,
) -> dict[tuple[int, int], Heading]:
    candidates: list[tuple[int, int, int, Line]] = []  # page, line, line count, first line
    for page in pages:
        number = 0
        while number < len(page.lines):
            count = _heading_lines(page, number, skip, body)
            if count:
                candidates.append((page.index, number, count, page.lines[number]))
                number += count
            else:
                number += 1
    if outlined:
        # The outline said which styles are headings; a style it never used is not one.
        candidates = [c for c in candidates if _style(c[3]) in styles]
    levels = _levels([_style(c[3]) for c in candidates], styles)
    found: dict[tuple[int, int], Heading] = {}
    for index, number, count, first in candidates:
        text = " ".join(line.text for line in pages[index].lines[number : number + count])
        depth = _NUMBER_DEPTH.match(text)
        level = len(depth.group(1).split(".")) if depth and not styles else levels[_style(first)]
        found[(index, number)] = Heading(text, min(level, _MAX_LEVEL), count)
    return found


def _levels(seen: list[tuple[float, bool]], known: dict[tuple[float, bool], int]) -> dict[tuple[float, bool], int]:
    """Larger type first, bold before regular at one size; the outline's levels win."""
    ranked = sorted(set(seen) - set(known), key=lambda style: (-style[0], not style[1]))
    levels = dict(known)
    for rank, style in enumerate(ranked, 1):
        levels[style] = rank
    return levels


def _heading_lines(page: Page, number: int, skip: set[tuple[int, int]], body: float) -> int:
    """How many lines from `number` form a typographic heading (0: none)."""
    lines = page.lines
    first = lines[number]
    if not (first.size >= body * LARGER or _bold_heading(lines, number, body)):
        return 0
    if (page.index, number) in skip or not _could_head(first, body):
        return 0
    count = 1
    while (
        count < _MAX_HEADING_LINES
        and number + count < len(lines)
        and (page.index, number + count) not in skip
        and _style(lines[number + count]) == _style(first)
        and 0 < first.baseline - lines[number + count].baseline <= first.size * 1.6 * count
        and _could_head(lines[number + count], body)
    ):
        count += 1
    text = " ".join(line.text for line in lines[number : number + count])
    return count if len(text) <= _MAX_HEADING_CHARS else 0


def _could_head(line: Line, body: float) -> bool:
    text = line.text
    return (
        line.size >= body * 0.95
        and not line.mono
        and not line.cells  # a table's row, bold as header rows are
        and len(text) <= _MAX_HEADING_CHARS
        and not text.endswith((",", ";"))
        and sum(ch.isalpha() for ch in text) >= 2
    )


def _bold_heading(lines: Sequence[Line], number: int, body: float) -> bool:
    line = lines[number]
    if not line.bold or len(line.text) > _MAX_BOLD_HEADING_CHARS:
        return False
    if _NUMBER_DEPTH.match(line.text):  # "2.1 Naming", not the list item "2. Double it."
        return not line.text.endswith(".")
    above = lines[number - 1] if number else None
    set_apart = (
        above is None or above.baseline - line.baseline >= body * 1.2 * _SET_APART or above.baseline < line.baseline
    )
    return set_apart and line.text[0].isupper() and not line.text.endswith((".", ":"))
