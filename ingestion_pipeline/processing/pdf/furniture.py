"""Page furniture: running headers and footers, page numbers and watermarks, found by what
repeats across pages, not by rules for one toolchain.

A line is furniture when it is at the top or the bottom of its page and the same text (digits
masked: "Chapter 2: Overview 5" and "Chapter 2: Overview 6" are one header) stands at the
same height on three pages or more; or it sits in a band where such lines were found (a
chapter's header seen on two pages only); or it is a bare page number there; or it is the
same text at the same place on half of the pages or more (a watermark, "DRAFT").
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from .lines import Line, Page

_EDGE_LINES = 2  # lines at each end of a page that may be furniture
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
_MIN_LETTERS = 3


def find_furniture(pages: Sequence[Page], heading_size: float) -> set[tuple[int, int]]:
    """(page index, line index) of every furniture line. Lines at least `heading_size`
    tall are headings, never furniture: a chapter's first line may stand where other pages
    carry their header."""
    edges = {page.index: _edge_lines(page) for page in pages}
    repeated = _repeated(pages, edges)
    bands = {_band(pages_line(pages, key).baseline) for key in repeated}
    found: set[tuple[int, int]] = set(repeated)
    for page in pages:
        for number in edges[page.index]:
            line = page.lines[number]
            if line.size >= heading_size:
                continue
            at_band = any(_band(line.baseline) + step in bands for step in (-1, 0, 1))
            if _PAGE_NUMBER.match(line.text) or (at_band and len(line.text) <= _BAND_MAX_CHARS):
                found.add((page.index, number))
    found |= _watermarks(pages)
    return {key for key in found if pages_line(pages, key).size < heading_size}


def pages_line(pages: Sequence[Page], key: tuple[int, int]) -> Line:
    """`pages` holds every page of the document, in order: pages[i].index == i."""
    index, number = key
    return pages[index].lines[number]


def _edge_lines(page: Page) -> list[int]:
    """The top and bottom lines by height: furniture is drawn first or last, but where it
    stands, not where it comes in the content stream, is what makes it furniture."""
    order = sorted(range(len(page.lines)), key=lambda number: -page.lines[number].baseline)
    return sorted(set(order[:_EDGE_LINES] + order[-_EDGE_LINES:]))


def _mask(text: str) -> str:
    return _DIGITS.sub("#", " ".join(text.lower().split()))


def _band(baseline: float) -> int:
    return round(baseline / _BAND)


def _repeated(pages: Sequence[Page], edges: dict[int, list[int]]) -> set[tuple[int, int]]:
    seen: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for page in pages:
        for number in edges[page.index]:
            line = page.lines[number]
            seen[(_mask(line.text), _band(line.baseline))].append((page.index, number))
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
    places: Counter[tuple[str, int]] = Counter()
    where: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for page in pages:
        for number, line in enumerate(page.lines):
            if sum(ch.isalpha() for ch in line.text) < _MIN_LETTERS:
                continue
            key = (_mask(line.text), _band(line.baseline))
            if not where[key] or where[key][-1][0] != page.index:
                places[key] += 1
            where[key].append((page.index, number))
    threshold = max(_WATERMARK_MIN_PAGES, _WATERMARK_SHARE * len(pages))
    return {found for key, count in places.items() if count >= threshold for found in where[key]}
