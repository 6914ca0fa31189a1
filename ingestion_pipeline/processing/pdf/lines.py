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
import re
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

# PDFium's generated line break; its mark for a hyphen it joined at a line end.
_BREAK = "\r\n"
_HYPHENATION = "\ufffe"
# Bold by the font's name where the weight is not set (TeX's Computer Modern Bold Extended
# CMBX reports 545): the usual name parts of bold and semibold cuts.
_BOLD_NAME = re.compile(r"bold|black|heavy|demi|semibold|CMBX|SFBX|CMB\d|-Medi", re.IGNORECASE)
_MONO_NAME = re.compile(r"mono|courier|CMTT|SFTT|xtt|typewriter|consol|code", re.IGNORECASE)
_BOLD_WEIGHT = 600
_CELL_GAP = 1.0  # sizes: a gap this wide between runs of text on a line parts table cells
_LONG_WORD = 9  # letters: a word this long may be two run together
# Words of letters only (identifiers, paths and numbers are long by nature); a word with an
# f-ligature in it (PDFium loses the space after one: "roffand"); a word's end punctuation
# glued to the next word ("Historically,the").
_WORD = re.compile(rf"[^\W\d_]{{{_LONG_WORD},}}|[^\W\d_]*f[fil][^\W\d_]+|[^\W\d_]{{2,}}[,;:.)][^\W\d_]{{2,}}")
_EVERY_WORD = re.compile(r"\S{4,}")
_SPLITS_TO_MEASURE_ALL = 3  # words split on a page before every word of it is measured
_SPACE_GAP_OVER = 0.12
_SPACE_GAP = 0.2  # of the type's size: an ink gap this wide between two letters is a space
_WIDE_CHAR = 0.55  # sizes: wider than most characters' advance in a proportional font
_MAX_RECTS = 64  # runs on a line looked at for cells: more is running text set word by word
_FIXED_PITCH = 1  # bit 1 of a font descriptor's /Flags


@dataclass(frozen=True)
class Line:
    """One line of a page. Coordinates in points, y upwards from the page's bottom."""

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


class _Style:
    """Reads characters' places and fonts through buffers reused for the whole page: a line
    costs a few calls into PDFium, and a font's name is parsed once."""

    def __init__(self, textpage: pdfium_c.FPDF_TEXTPAGE) -> None:
        self._textpage = textpage
        self._name = ctypes.create_string_buffer(128)
        self._flags = ctypes.c_int()
        self._fonts: dict[tuple[bytes, int], tuple[bool, bool]] = {}
        self.x, self.y = ctypes.c_double(), ctypes.c_double()
        self.box = [ctypes.c_double() for _ in range(4)]
        self._refs = [ctypes.byref(value) for value in self.box]
        self.splits = 0  # words split at a gap on this page

    def origin(self, index: int) -> tuple[float, float]:
        pdfium_c.FPDFText_GetCharOrigin(self._textpage, index, self.x, self.y)
        return self.x.value, self.y.value

    def right(self, index: int) -> float:
        return self.span(index)[1]

    def span(self, index: int) -> tuple[float, float]:
        pdfium_c.FPDFText_GetCharBox(self._textpage, index, *self.box)  # left, right, bottom, top
        return float(self.box[0].value), float(self.box[1].value)

    def spans(self, first: int, count: int) -> tuple[list[float], list[float]]:
        """Left and right edges of `count` characters from `first`: the loop the separation of
        words spends its time in, so the call and its arguments are bound once."""
        get, textpage, refs = pdfium_c.FPDFText_GetCharBox, self._textpage, self._refs
        left, right = self.box[0], self.box[1]
        lefts, rights = [], []
        for index in range(first, first + count):
            get(textpage, index, *refs)
            lefts.append(left.value)
            rights.append(right.value)
        return lefts, rights

    def bold_mono(self, index: int) -> tuple[bool, bool]:
        pdfium_c.FPDFText_GetFontInfo(self._textpage, index, self._name, len(self._name), self._flags)
        key = (self._name.value, self._flags.value)
        font = self._fonts.get(key)
        if font is None:
            name = key[0].decode("latin-1")
            name = name.partition("+")[2] or name  # a subset's prefix: ABCDEF+CMBX12
            font = bool(_BOLD_NAME.search(name)), bool(key[1] & _FIXED_PITCH) or bool(_MONO_NAME.search(name))
            self._fonts[key] = font
        bold = font[0] or pdfium_c.FPDFText_GetFontWeight(self._textpage, index) >= _BOLD_WEIGHT
        return bold, font[1]


def read_page(document: pdfium.PdfDocument, index: int) -> Page:
    page = document[index]
    try:
        width, height = page.get_size()
        textpage = page.get_textpage()
        try:
            lines = _lines(textpage)
        finally:
            textpage.close()
    finally:
        page.close()
    return Page(index, width, height, tuple(lines))


def _lines(textpage: pdfium.PdfTextPage) -> list[Line]:
    count = textpage.count_chars()
    if count <= 0:
        return []
    text = textpage.get_text_range(0, count)
    raw = textpage.raw
    # The text's offsets are the characters' indexes unless PDFium left some out (rare):
    # then each sampled offset is translated.
    aligned = len(text) == count
    style = _Style(raw)
    lines = _read_lines(raw, style, text, aligned, _WORD)
    if style.splits >= _SPLITS_TO_MEASURE_ALL:
        # PDFium runs words together on this page (Ghostscript's groff output: "makea",
        # "Wesee"): every word of it is measured, short ones too. Pages where it does not
        # cost nothing more.
        lines = _read_lines(raw, style, text, aligned, _EVERY_WORD)
    return lines


def _read_lines(
    raw: pdfium_c.FPDF_TEXTPAGE, style: _Style, text: str, aligned: bool, words: re.Pattern[str]
) -> list[Line]:
    lines: list[Line] = []
    start = 0
    for part in text.split(_BREAK):
        line = _line(raw, style, part, start, aligned, words)
        if line is not None:
            lines.append(line)
        start += len(part) + len(_BREAK)
    return lines


def _unmarked(text: str) -> str:
    """Text without PDFium's marks: the hyphen it joined a line at (U+FFFE), and U+0002."""
    return text.replace(_HYPHENATION, "").replace("\x02", "")


def _solid_near(part: str, offset: int) -> int:
    """The offset of a character near `offset` that is not a space: a space PDFium put
    between words has no font (its size reads 1.0)."""
    for step in range(len(part)):
        for at in (offset - step, offset + step):
            if 0 <= at < len(part) and not part[at].isspace():
                return at
    return offset


def _separated(style: _Style, part: str, start: int, size: float, words: re.Pattern[str]) -> str:
    """`part` with a space wherever a long "word" has a gap as wide as a space inside it.

    PDFium puts a space where text objects stand apart, and where a TJ array moves the pen
    by about a space; Ghostscript's PDFs of groff output move it by less in justified lines
    (`rofftype-setting`, `wascalled` with 3 points between the words' letters at 10 points).
    Only words of _LONG_WORD characters or more are measured: two words run together make
    one, and measuring every character would cost more than PDFium's own reading."""
    out: list[str] = []
    at = 0
    for word in words.finditer(part):
        out.append(part[at : word.start()])
        first = start + word.start()
        # Inline code in a fixed-pitch font: a narrow glyph ('j', ':') stands in a wide cell.
        mono = style.bold_mono(first)[1]
        out.append(word.group() if mono else _split_at_gaps(style, word.group(), first, size))
        at = word.end()
    out.append(part[at:])
    return "".join(out)


def _split_at_gaps(style: _Style, word: str, first: int, size: float) -> str:
    """Split where the gap between two characters is a space's: wider than _SPACE_GAP of the
    size, and wider by _SPACE_GAP_OVER than the word's usual gap (some writers space every
    letter of a word out: that is no space)."""
    lefts, rights = style.spans(first, len(word))
    gaps = [lefts[offset] - rights[offset - 1] for offset in range(1, len(word))]
    usual = sorted(gaps)[len(gaps) // 2] if gaps else 0.0
    pieces, begin = [], 0
    for offset, gap in enumerate(gaps, 1):
        if gap > _SPACE_GAP * size and gap > usual + _SPACE_GAP_OVER * size and _parts_here(word, offset):
            pieces.append(word[begin:offset])
            begin = offset
    pieces.append(word[begin:])
    style.splits += len(pieces) - 1
    return " ".join(pieces)


def _parts_here(word: str, offset: int) -> bool:
    """A gap can be a space between two letters or digits, or after a comma, semicolon or
    colon before a letter; not beside other punctuation, whose glyphs stand in wider cells
    in code (`install.patch`, `/usr/bin`, `fix-gentoo`)."""
    before, after = word[offset - 1], word[offset]
    return after.isalnum() and (before.isalnum() or before in ",;:")


def _line(
    raw: pdfium_c.FPDF_TEXTPAGE, style: _Style, part: str, start: int, aligned: bool, words: re.Pattern[str]
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
    left, baseline = style.origin(first)
    last_y = style.origin(last)[1]
    last_baseline = min(last_y, baseline) if abs(last_y - baseline) > 1 else baseline
    right = max(style.right(last), left)
    size = pdfium_c.FPDFText_GetFontSize(raw, middle)
    # First and last character: a heading's line is bold throughout, a line with a bold
    # word is not (and a bold word is rarely both a line's first and its last).
    (bold_first, mono_first), (bold_last, mono_last) = style.bold_mono(first), style.bold_mono(last)
    bold, mono = bold_first and bold_last, mono_first and mono_last
    # Only a line wider than its characters need (a wide gap in it) is looked at for cells:
    # reading the runs of every line would cost a third of the reading.
    spread = right - left > (len(stripped) * _WIDE_CHAR + _CELL_GAP) * size
    cells, lefts = _cells(raw, first, last - first + 1, size) if spread else ((), ())
    # Code in a fixed-pitch font is left alone: a narrow glyph ('.', 'l') stands in a wide cell.
    if aligned and not mono and words.search(part):  # measured on `part`: its offsets are the characters'
        stripped = _unmarked(_separated(style, part, start, size, words))
    return Line(" ".join(stripped.split()), left, right, baseline, last_baseline, size, bold, mono, cells, lefts)


def _cells(
    raw: pdfium_c.FPDF_TEXTPAGE, first: int, count: int, size: float
) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The line's cells: PDFium's text rectangles (one per text object) merged where they
    stand closer than a cell gap. One cell: running text, nothing returned."""
    rects = pdfium_c.FPDFText_CountRects(raw, first, count)
    if rects < 2 or rects > _MAX_RECTS:
        return (), ()
    box = [ctypes.c_double() for _ in range(4)]
    groups: list[list[float]] = []  # left, top, right, bottom
    for index in range(rects):
        pdfium_c.FPDFText_GetRect(raw, index, *box)
        left, top, right, bottom = (value.value for value in box)
        if groups and groups[-1][2] - 1 <= left < groups[-1][2] + _CELL_GAP * size:
            group = groups[-1]
            group[1], group[2], group[3] = max(group[1], top), max(group[2], right), min(group[3], bottom)
        else:
            groups.append([left, top, right, bottom])
    if len(groups) < 2:
        return (), ()
    texts = tuple(" ".join(_bounded(raw, group).split()) for group in groups)
    return texts, tuple(group[0] for group in groups)


def _bounded(raw: pdfium_c.FPDF_TEXTPAGE, rect: list[float]) -> str:
    left, top, right, bottom = rect
    args = (raw, left - 0.5, top, right + 0.5, bottom)
    length = pdfium_c.FPDFText_GetBoundedText(*args, None, 0)
    if length <= 0:
        return ""
    buffer = (ctypes.c_ushort * length)()
    pdfium_c.FPDFText_GetBoundedText(*args, buffer, length)
    return _unmarked(bytes(buffer).decode("utf-16-le", errors="ignore"))
