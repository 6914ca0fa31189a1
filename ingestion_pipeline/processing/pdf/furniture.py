"""Page furniture: running headers and footers, page numbers and watermarks, found by what
repeats across pages, not by rules for one toolchain.

A line is furniture when it is at the top or the bottom of its page and the same text (digits
masked: "Chapter 2: Overview 5" and "Chapter 2: Overview 6" are one header) stands at the
same height on three pages or more; or it sits in a band where such lines were found (a
chapter's header seen on two pages only); or it is a bare page number there; or it is the
same short text at the same place on half of the pages or more (a watermark, "DRAFT").
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from .lines import Line, Page

_SET_APART = 1.5  # sizes: the gap between a second furniture line and the text
_REPEATS = 3  # pages a header must repeat on
_BAND = 2.0  # points: the same height within this
_BAND_MAX_CHARS = 120  # a header in a furniture band is short
_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(
    r"^(?:page\s+)?[-–—(\[]?\s*(?:\d{1,5}|[ivxlcdm]{1,8})\s*[-–—)\]]?(?:\s*(?:/|of)\s*\d{1,5})?$",
    re.IGNORECASE,
)
_WATERMARK_SHARE = 0.5
_WATERMARK_MIN_PAGES = 4
_WATERMARK_MAX_CHARS = 60  # "DRAFT", "Confidential: do not distribute"; not a line of prose
_MIN_LETTERS = 3


def find_furniture(pages: Sequence[Page], heading_size: float) -> set[tuple[int, int]]:
    """(page index, line index) of every furniture line. Lines at least `heading_size`
    tall are headings, never furniture: a chapter's first line may stand where other pages
    carry their header. The second line from an edge is furniture only below (or above) a
    first that is: a header of two lines, never a page's first sentence."""
    ends = [(page.index, end) for page in pages for end in _edge_lines(page)]
    found = _among(pages, [(index, end[0]) for index, end in ends if end], heading_size)
    inner = [(index, end[1]) for index, end in ends if len(end) > 1 and (index, end[0]) in found]
    found |= _among(pages, inner, heading_size)
    return {key for key in found if pages_line(pages, key).size < heading_size} | _watermarks(pages)


def _among(pages: Sequence[Page], candidates: list[tuple[int, int]], heading_size: float) -> set[tuple[int, int]]:
    repeated = _repeated(pages, candidates)
    bands = {_band(pages_line(pages, key).baseline) for key in repeated}
    found = set(repeated)
    for key in candidates:
        line = pages_line(pages, key)
        if line.size >= heading_size:
            continue
        at_band = any(_band(line.baseline) + step in bands for step in (-1, 0, 1))
        if _PAGE_NUMBER.match(line.text) or (at_band and len(line.text) <= _BAND_MAX_CHARS):
            found.add(key)
    return found


def pages_line(pages: Sequence[Page], key: tuple[int, int]) -> Line:
    """`pages` holds every page of the document, in order: pages[i].index == i."""
    index, number = key
    return pages[index].lines[number]


def _edge_lines(page: Page) -> list[list[int]]:
    """The top and the bottom lines by height, outermost first: furniture is drawn first or
    last, but where it stands, not where it comes in the content stream, makes it furniture.
    A line counts only when a gap sets it apart from the text inside it, as furniture is;
    the second only below (above) a first that does."""
    order = sorted(range(len(page.lines)), key=lambda number: -page.lines[number].baseline)
    ends: list[list[int]] = []
    for end in (order, order[::-1]):
        lines: list[int] = []
        for at in range(min(2, len(end))):
            inside = page.lines[end[at + 1]] if at + 1 < len(end) else None
            line = page.lines[end[at]]
            if inside is not None and abs(line.baseline - inside.baseline) < _SET_APART * line.size:
                break
            lines.append(end[at])
        ends.append(lines)
    return ends


def _mask(text: str) -> str:
    return _DIGITS.sub("#", " ".join(text.lower().split()))


def _band(baseline: float) -> int:
    return round(baseline / _BAND)


def _repeated(pages: Sequence[Page], candidates: list[tuple[int, int]]) -> set[tuple[int, int]]:
    seen: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for key in candidates:
        line = pages_line(pages, key)
        seen[(_mask(line.text), _band(line.baseline))].append(key)
    # Heights within one band of each other are the same place (rounding splits them).
    merged: dict[tuple[str, int], set[tuple[int, int]]] = defaultdict(set)
    for (mask, band), keys in seen.items():
        for near in (band - 1, band, band + 1):
            merged[(mask, near)].update(keys)
    found: set[tuple[int, int]] = set()
    for places in merged.values():
        if len({index for index, _ in places}) >= _REPEATS:
            found |= places
    return found


def _watermarks(pages: Sequence[Page]) -> set[tuple[int, int]]:
    where: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for page in pages:
        for number, line in enumerate(page.lines):
            if len(line.text) <= _WATERMARK_MAX_CHARS:  # the same words: no masking
                where[(line.text, _band(line.baseline))].append((page.index, number))
    threshold = max(_WATERMARK_MIN_PAGES, _WATERMARK_SHARE * len(pages))
    found: set[tuple[int, int]] = set()
    for keys in where.values():
        if len({index for index, _ in keys}) >= threshold:
            found |= {(index, number) for index, number in keys if _lone(pages[index], number)}
    return found


def _lone(page: Page, number: int) -> bool:
    """A watermark is a few words with no text a line's height above or below it."""
    line = page.lines[number]
    if sum(ch.isalpha() for ch in line.text) < _MIN_LETTERS:
        return False
    return all(
        abs(other.baseline - line.baseline) >= _SET_APART * min(line.size, other.size)
        for at, other in enumerate(page.lines)
        if at != number and other.right > line.left and other.left < line.right
    )
