"""The lines of a PDF page as PDFium lays them out: text in content order (PDFium puts a
space where glyphs stand apart and a line break where the baseline moves), with where each
line stands and in what type it is set.

PDFium (pypdfium2) over pypdf and pdfminer.six: on the benchmark's toolchains it separates
words that pypdf runs together (TeX's kerned spaces, groff's one-word text objects), joins
TeX's line-end hyphenation itself (it marks the hyphen U+FFFE), and reads 10-20 times
faster (bench/pdf_quality.py). A line's geometry and type come from a few of its characters,
not all of them: a per-character loop in Python would cost more than PDFium's own reading.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import NamedTuple

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from .chars import Chars
from .shifts import Shifts, moved_spaces
from .words import SPLITS_TO_MEASURE_ALL, respaced, separated

# PDFium's generated line break; its mark for a hyphen it joined at a line end.
_BREAK = "\r\n"
_HYPHENATION = "\ufffe"
_CELL_GAP = 1.0  # sizes: a gap this wide between runs of text on a line parts table cells
_WIDE_CHAR = 0.55  # sizes: wider than most characters' advance in a proportional font
_MAX_RECTS = 64  # runs on a line looked at for cells: more is running text set word by word
_CELL_BUFFER = 512  # UTF-16 units: a cell's text read in one call when it fits


class Line(NamedTuple):
    """One line of a page. Coordinates in points, y upwards from the page's bottom. A named
    tuple, not a frozen dataclass: made for every line of every page, it costs a quarter as
    much to make (a frozen dataclass sets each field through object.__setattr__)."""

    text: str
    left: float
    right: float
    baseline: float
    last_baseline: float  # lower than `baseline` where PDFium joined a hyphenated line
    size: float  # the font size of the line's middle character, in points
    bold: bool  # every sampled character is bold: a heading's line, not a bold word
    mono: bool  # set in a fixed-pitch font: code, whose line breaks are kept
    # Where the line is runs of text set apart by more than a word's space (a table's row):
    # each run's text and left edge; empty for a line of running text.
    cells: tuple[str, ...] = ()
    cell_lefts: tuple[float, ...] = ()


@dataclass(frozen=True)
class Page:
    index: int  # 0-based, the PDF's own page order
    width: float
    height: float
    lines: tuple[Line, ...]


class Spacing:
    """What a document's pages read so far showed of PDFium's spaces: on how many of them it
    ran words together (words.py), and so whether the next page has every word measured."""

    def __init__(self) -> None:
        self.pages = 0
        self.run_together = 0
        self.shifts = Shifts()  # word spaces PDFium moved (shifts.py)

    @property
    def every_word(self) -> bool:
        return self.run_together > 0 and 2 * self.run_together >= self.pages


def read_page(document: pdfium.PdfDocument, index: int, spacing: Spacing | None = None) -> Page:
    """The page's lines. PDFium's own calls, not pypdfium2's page and text page objects: their
    bookkeeping costs a fifth of what loading the page does."""
    page = pdfium_c.FPDF_LoadPage(document.raw, index)
    if not page:
        raise pdfium.PdfiumError("Failed to load page.")
    try:
        width, height = pdfium_c.FPDF_GetPageWidthF(page), pdfium_c.FPDF_GetPageHeightF(page)
        textpage = pdfium_c.FPDFText_LoadPage(page)
        if not textpage:
            raise pdfium.PdfiumError("Failed to load text page.")
        try:
            lines = _lines(textpage, spacing or Spacing())
        finally:
            pdfium_c.FPDFText_ClosePage(textpage)
    finally:
        pdfium_c.FPDF_ClosePage(page)
    return Page(index, width, height, tuple(lines))


def _text(raw: pdfium_c.FPDF_TEXTPAGE, count: int) -> str:
    """The page's text, from its first character PDFium puts in its text to its last (as
    pypdfium2's get_text_range: PDFium reads past a range that ends with one it leaves out)."""
    first, last = 0, count - 1
    while first <= last and pdfium_c.FPDFText_GetTextIndexFromCharIndex(raw, first) < 0:
        first += 1
    while last >= first and pdfium_c.FPDFText_GetTextIndexFromCharIndex(raw, last) < 0:
        last -= 1
    if last < first:
        return ""
    size = (
        pdfium_c.FPDFText_GetTextIndexFromCharIndex(raw, last)
        + 2
        - pdfium_c.FPDFText_GetTextIndexFromCharIndex(raw, first)
    )
    buffer = (ctypes.c_ushort * size)()
    written = pdfium_c.FPDFText_GetText(raw, first, last - first + 1, buffer)
    return bytes(memoryview(buffer)[: max(written - 1, 0)]).decode("utf-16-le", errors="ignore")


def _lines(raw: pdfium_c.FPDF_TEXTPAGE, spacing: Spacing) -> list[Line]:
    count = pdfium_c.FPDFText_CountChars(raw)
    if count <= 0:
        return []
    text = _text(raw, count)
    # The text's offsets are the characters' indexes unless PDFium left some out (rare):
    # then each sampled offset is translated, and words are not measured.
    aligned = len(text) == count
    chars = Chars(raw)
    every = spacing.every_word
    lines: list[Line] = []
    measured: list[tuple[int, str, int]] = []  # line, its text and first character's index
    start = 0
    for part in text.split(_BREAK):
        line = _line(raw, chars, part, start, aligned, separate=not every)
        if line is not None:
            if aligned and not line.mono:
                measured.append((len(lines), part, start))
            lines.append(line)
        start += len(part) + len(_BREAK)
    spacing.pages += 1
    if every or chars.splits >= SPLITS_TO_MEASURE_ALL:
        # PDFium runs words together on this page (Ghostscript's groff output: "makea",
        # "Wesee"): its lines are measured letter by letter. Pages where it does not cost
        # nothing more.
        spacing.run_together += 1
        for number, part, start in measured:
            line = lines[number]
            lines[number] = line._replace(text=" ".join(_unmarked(respaced(chars, part, start, line.size)).split()))
    if spacing.shifts.looking:
        parts = [(number, part, start, lines[number].size) for number, part, start in measured]
        for number, (before, after) in moved_spaces(raw, chars, parts, spacing.shifts).items():
            line, before, after = lines[number], " ".join(_unmarked(before).split()), " ".join(_unmarked(after).split())
            if line.text.count(before) == 1:
                lines[number] = line._replace(text=line.text.replace(before, after))
    return lines


def _unmarked(text: str) -> str:
    """Text without PDFium's marks: the hyphen it joined a line at (U+FFFE), and U+0002."""
    return text.replace(_HYPHENATION, "").replace("\x02", "")


def _solid_near(part: str, offset: int) -> int:
    """The offset of a character near `offset` that is not a space: a space PDFium put
    between words has no font (its size reads 1.0)."""
    if not part[offset].isspace():  # most lines
        return offset
    for step in range(len(part)):
        for at in (offset - step, offset + step):
            if 0 <= at < len(part) and not part[at].isspace():
                return at
    return offset


def _line(
    raw: pdfium_c.FPDF_TEXTPAGE, chars: Chars, part: str, start: int, aligned: bool, *, separate: bool
) -> Line | None:
    text = _unmarked(part)
    stripped = text.strip()
    if not stripped:
        return None
    first = start + (len(part) - len(part.lstrip()))
    last = start + len(part.rstrip()) - 1
    middle = start + _solid_near(part, (first + last) // 2 - start)
    if not aligned:
        first, middle, last = (pdfium_c.FPDFText_GetCharIndexFromTextIndex(raw, i) for i in (first, middle, last))
    left, baseline = chars.origin(first)
    last_y = chars.origin(last)[1]
    last_baseline = min(last_y, baseline) if abs(last_y - baseline) > 1 else baseline
    right = max(chars.right(last), left)
    size = chars.size(middle)
    # First and last character: a heading's line is bold throughout, a line with a bold
    # word is not (and a bold word is rarely both a line's first and its last).
    (bold_first, mono_first), (bold_last, mono_last) = chars.bold_mono(first), chars.bold_mono(last)
    bold, mono = bold_first and bold_last, mono_first and mono_last
    # Only a line wider than its characters need (a wide gap in it) is looked at for cells:
    # reading the runs of every line would cost a third of the reading.
    spread = right - left > (len(stripped) * _WIDE_CHAR + _CELL_GAP) * size
    cells, lefts = _cells(raw, chars, first, last - first + 1, size) if spread else ((), ())
    # Code in a fixed-pitch font is left alone: a narrow glyph ('.', 'l') stands in a wide cell.
    if separate and aligned and not mono:  # measured on `part`: its offsets are the characters'
        spaced = separated(chars, part, start, size)
        if spaced is not part:
            stripped = _unmarked(spaced)
    return Line(" ".join(stripped.split()), left, right, baseline, last_baseline, size, bold, mono, cells, lefts)


def _cells(
    raw: pdfium_c.FPDF_TEXTPAGE, chars: Chars, first: int, count: int, size: float
) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The line's cells: PDFium's text rectangles (one per text object) merged where they
    stand closer than a cell gap. One cell: running text, nothing returned."""
    rects = pdfium_c.FPDFText_CountRects(raw, first, count)
    if rects < 2 or rects > _MAX_RECTS:
        return (), ()
    groups: list[list[float]] = []  # left, top, right, bottom
    for left, top, right, bottom in chars.rects(rects):
        if groups and groups[-1][2] - 1 <= left < groups[-1][2] + _CELL_GAP * size:
            group = groups[-1]
            group[1], group[2], group[3] = max(group[1], top), max(group[2], right), min(group[3], bottom)
        else:
            groups.append([left, top, right, bottom])
    if len(groups) < 2:
        return (), ()
    buffer = (ctypes.c_ushort * _CELL_BUFFER)()
    texts = tuple(" ".join(_bounded(raw, group, buffer).split()) for group in groups)
    return texts, tuple(group[0] for group in groups)


def _bounded(raw: pdfium_c.FPDF_TEXTPAGE, rect: list[float], buffer: ctypes.Array[ctypes.c_ushort]) -> str:
    """The text PDFium finds in `rect`: one call where it fits in `buffer` (PDFium looks at
    every character of the page on each call), else asked for its length first."""
    left, top, right, bottom = rect
    args = (raw, left - 0.5, top, right + 0.5, bottom)
    written = pdfium_c.FPDFText_GetBoundedText(*args, buffer, len(buffer))
    if 0 < written < len(buffer):
        text = bytes(memoryview(buffer)[:written]).decode("utf-16-le", errors="ignore")
        text = text[:-1] if text.endswith("\x00") else text  # PDFium copies its terminator too
        # Past the BMP PDFium's length counts characters, not UTF-16 units: asked as below.
        if text.isascii() or max(text) <= "\uffff":
            return _unmarked(text)
    length = pdfium_c.FPDFText_GetBoundedText(*args, None, 0)
    if length <= 0:
        return ""
    whole = (ctypes.c_ushort * length)()
    pdfium_c.FPDFText_GetBoundedText(*args, whole, length)
    return _unmarked(bytes(whole).decode("utf-16-le", errors="ignore"))
