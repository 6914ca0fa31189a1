"""What bench/pdf_quality.py measures: the HTML twin's truth (paragraphs, table rows, headings,
sentences) and the scores of an extracted text against it. The definitions are in
bench/pdf_quality.py's docstring; this module is their code.

Every comparison runs on `norm(text)`: NFKC (ligatures, full-width forms, special spaces),
accents dropped (NFKD, combining marks removed), case folded, soft hyphens and zero-width
characters removed, every hyphen or dash removed together with the whitespace after it (so a
line-end hyphen joins both sides, `inter- cept` and `intercept` alike, and `well-known` reads
`wellknown` on both sides), every other character that is not a letter, digit or whitespace
made a space, and whitespace collapsed to one space. Matches are of whole words: needle and
text are padded with a space.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bs4 import BeautifulSoup, Comment, PageElement, Tag

MIN_PARAGRAPH_WORDS = 8
MIN_SENTENCE_WORDS = 10
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_HYPHEN = re.compile(r"[-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d]\s*")
_NOT_WORD = re.compile(r"[^\w\s]|_")
_DIGITS = re.compile(r"\d+")
_NUMBERING = re.compile(r"^(?:(?:chapter|appendix|section|part)\s+)?(?:[a-z]\s+(?=\d))?(?:\d+\s+)*")
_ROMAN = re.compile(r"^(?=[ivxlcdm])m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
# Blocks that carry no document text: navigation, running page parts of generated HTML
# (texinfo's nav-panel, DocBook's navheader, Sphinx's related bar), tables of contents.
_SKIP_TAGS = {"nav", "header", "footer", "script", "style", "pre", "table"}
_SKIP_CLASS = re.compile(
    r"nav|header|footer|sidebar|related|breadcrumb|\btoc\b|menu|headerlink|footnote|printindex|index-|letters",
    re.I,
)
GAP = 200  # characters allowed between two pieces of a paragraph (a link's text, a URL, a mark)
_BLOCK_TAGS = {"p", "li", "dd", "dl", "ul", "ol", "table", "pre", "div", "blockquote", "h1", "h2", "h3", "h4"}


def norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    text = _HYPHEN.sub("", text.casefold())
    return " ".join(_NOT_WORD.sub(" ", text).split())


def padded(text: str) -> str:
    return f" {norm(text)} "


def strip_numbering(heading: str) -> str:
    """A normalized heading without its section numbering (`2 1 foo` -> `foo`)."""
    return _NUMBERING.sub("", heading).strip()


# -- the HTML twin ------------------------------------------------------------------------


@dataclass
class Truth:
    """One document's HTML twin: per HTML file its paragraphs (normalized), in order."""

    files: list[list[tuple[str, ...]]] = field(default_factory=list)  # paragraphs as pieces
    raw_paragraphs: list[str] = field(default_factory=list)  # un-normalized, for queries
    rows: list[list[str]] = field(default_factory=list)  # normalized non-empty cells
    headings: list[str] = field(default_factory=list)  # normalized, unique, in order
    text: str = ""  # the whole twin, normalized and padded (furniture budgets)

    @property
    def paragraphs(self) -> int:
        return sum(len(f) for f in self.files)


def _skipped(element: Tag) -> bool:
    for node in (element, *element.parents):
        if not isinstance(node, Tag):
            continue
        if node.name in _SKIP_TAGS:
            return True
        names = " ".join(node.get("class") or []) + " " + str(node.get("id") or "")
        if _SKIP_CLASS.search(names):
            return True
    return False


def _pieces(element: Tag) -> tuple[str, ...]:
    """The paragraph's text outside links and superscripts (footnote marks), normalized, as
    the pieces those cut it into: a PDF prints a link's URL or a footnote's number there."""
    pieces, current = [], []
    for node in element.descendants:
        if isinstance(node, Tag):
            if node.name == "br":
                current.append(" ")
        elif not isinstance(node, Comment):
            if _cut(node, element):
                pieces.append("".join(current))
                current = []
            else:
                current.append(str(node))
    pieces.append("".join(current))
    return tuple(n for n in map(norm, pieces) if n)


def _cut(node: PageElement, element: Tag) -> bool:
    for parent in node.parents:
        if parent is element:
            return False
        if parent.name == "sup" or (parent.name == "a" and parent.get("href")):
            return True
    return False


def _text(element: Tag) -> str:
    for br in element.find_all("br"):
        br.replace_with(" ")
    return " ".join(element.get_text().split())


def read_truth(files: Sequence[Path]) -> Truth:
    truth, headings, texts = Truth(), dict.fromkeys([]), []
    for path in files:
        soup = BeautifulSoup(path.read_bytes(), "lxml")
        for link in soup.select("a.headerlink"):
            link.decompose()
        body = soup.body or soup
        texts.append(body.get_text(" "))
        paragraphs = []
        for element in body.find_all(["p", "li", "dd"]):
            if _skipped(element) or element.find(_BLOCK_TAGS):
                continue
            pieces = _pieces(element)
            if sum(len(p.split()) for p in pieces) >= MIN_PARAGRAPH_WORDS:
                paragraphs.append(pieces)
                truth.raw_paragraphs.append(_text(element))
        truth.files.append(paragraphs)
        for table in body.find_all("table"):
            own = " ".join(table.get("class") or [])
            if table.find("table") or _SKIP_CLASS.search(own) or (table.parent and _skipped(table.parent)):
                continue
            for tr in table.find_all("tr"):
                cells = [norm(_text(c)) for c in tr.find_all(["td", "th"], recursive=False)]
                cells = [c for c in cells if c]
                if len(cells) >= 2:
                    truth.rows.append(cells)
        for h in body.find_all(["h1", "h2", "h3", "h4"]):
            text = norm(_text(h))
            if not _skipped(h) and re.search(r"[a-z]", text):
                headings[text] = None
    truth.headings = list(headings)
    truth.text = f" {norm(' '.join(texts))} "
    return truth


# -- scores of one extracted text --------------------------------------------------------


@dataclass
class Fidelity:
    found: int = 0  # in order
    out_of_order: int = 0  # present, but before the previous paragraph's end
    total: int = 0

    @property
    def share(self) -> float:
        return self.found / self.total if self.total else float("nan")


def find_paragraph(pieces: Sequence[str], text: str, start: int = 0, tries: int = 200) -> tuple[int, int]:
    """(start, end) of the paragraph's pieces in order in `text` from `start`, each whole and
    at most GAP characters after the previous one; (-1, -1) when they are not there."""
    first = f" {pieces[0]} "
    at = text.find(first, start)
    for _ in range(tries):
        if at < 0:
            break
        end = at + len(first) - 1
        for piece in pieces[1:]:
            found = text.find(f" {piece} ", end, end + GAP + len(piece) + 2)
            if found < 0:
                break
            end = found + len(piece) + 1
        else:
            return at, end
        at = text.find(first, at + 1)
    return -1, -1


def fidelity(truth: Truth, text: str) -> Fidelity:
    """`text` normalized and padded. Each HTML file's paragraphs are looked for in order: from
    the end of the previous one found (the file's first from the start); one found only before
    that is out of order (not counted) and the search goes on from it."""
    score = Fidelity()
    for paragraphs in truth.files:
        cursor = 0
        for pieces in paragraphs:
            score.total += 1
            _at, end = find_paragraph(pieces, text, cursor)
            if end >= 0:
                score.found += 1
            else:
                _at, end = find_paragraph(pieces, text)
                if end < 0:
                    continue
                score.out_of_order += 1
            cursor = end
    return score


def row_found(cells: Sequence[str], text: str, tries: int = 200) -> bool:
    """The row's cells in order, all within 3x the row's length from the first cell."""
    window = 3 * sum(len(c) + 1 for c in cells)
    start = 0
    for _ in range(tries):
        first = text.find(f" {cells[0]} ", start)
        if first < 0:
            return False
        pos, ok = first + len(cells[0]) + 1, True
        for cell in cells[1:]:
            at = text.find(f" {cell} ", pos, first + window)
            if at < 0:
                ok = False
                break
            pos = at + len(cell) + 1
        if ok:
            return True
        start = first + 1
    return False


def table_rows(truth: Truth, text: str) -> tuple[int, int]:
    return sum(row_found(cells, text) for cells in truth.rows), len(truth.rows)


def expected_headings(truth: Truth, reference: str) -> list[str]:
    """The twin's headings that the PDF prints (found in pdftotext's text): the denominator."""
    return [h for h in truth.headings if f" {h} " in reference or f" {strip_numbering(h)} " in reference]


def headings_kept(expected: Sequence[str], found: Iterable[str | None]) -> int:
    ours: set[str] = set()
    for heading in found:
        if heading:
            ours |= {norm(heading), strip_numbering(norm(heading))}
    ours.discard("")
    return sum(1 for h in expected if h in ours or (strip_numbering(h) or h) in ours)


# -- page furniture ---------------------------------------------------------------------


@dataclass
class Furniture:
    lines: set[str]  # running lines with letters, normalized
    breaks: list[tuple[str, str, str]]  # a bare page number and the body words around it
    body: str  # pdftotext's text without the running lines and numbers, normalized, padded


def furniture(pages: Sequence[str], min_pages: int = 3) -> Furniture:
    """A PDF's running lines, from pdftotext's pages: the first and last non-empty line of each
    page whose normalized text with digits masked repeats on `min_pages` pages or more (each
    within 2 pages of another), and bare page numbers (arabic or roman) there."""
    texts = [[n for n in map(norm, page.splitlines()) if n] for page in pages]
    where: dict[str, set[int]] = defaultdict(set)
    for index, text in enumerate(texts):
        for edge in {0, len(text) - 1} if text else set():
            where[_DIGITS.sub("#", text[edge])].add(index)
    # running: on `min_pages` pages or more, each within 2 pages of another (a chapter's
    # opening "Chapter" repeats too, but never on pages that near)
    keys = {k: sum(1 for i in p if {i - 2, i - 1, i + 1, i + 2} & p) for k, p in where.items()}
    lines, numbers, bodies = set(), {}, []
    for index, text in enumerate(texts):
        body = list(text)
        for edge in sorted({0, len(text) - 1} if text else set(), reverse=True):
            line = text[edge]
            if line.isdigit() or _ROMAN.match(line):
                numbers[index, edge == 0] = line
            elif keys.get(_DIGITS.sub("#", line), 0) >= min_pages and re.search(r"[a-z]", line):
                lines.add(line)
            else:
                continue
            del body[edge]
        bodies.append(" ".join(body).split())
    breaks = []
    for (index, top), number in numbers.items():
        before, after = (index - 1, index) if top else (index, index + 1)
        tail = " ".join(bodies[before][-3:]) if 0 <= before < len(bodies) else ""
        head = " ".join(bodies[after][:3]) if after < len(bodies) else ""
        breaks.append((tail, number, head))
    return Furniture(lines, breaks, " " + " ".join(" ".join(b) for b in bodies) + " ")


@dataclass
class ChunkText:
    text: str  # the chunk
    fresh: str  # the part not shared with the previous chunk of its section


def furniture_chunks(chunks: Sequence[ChunkText], found: Furniture, truth: Truth) -> set[int]:
    """Chunks holding page furniture. A running line f: its budget is the most times f occurs
    in the HTML twin's text or in pdftotext's text without the furniture; its occurrences in
    the chunks (each counted once: not again in the next chunk's overlap) past the budget are
    furniture, taken first where f stands on a line of its own in the chunk, then in document
    order. A bare page number: a chunk that holds it between the last 3 words of the page
    before it and the first 3 of the page after it (each at most 12 words away)."""
    flagged: set[int] = set()
    normalized = [(padded(c.fresh), c.text) for c in chunks]
    for line in found.lines:
        needle = f" {line} "
        budget = max(truth.text.count(needle), found.body.count(needle))
        counts = [fresh.count(needle) for fresh, _raw in normalized]
        excess = sum(counts) - budget
        if excess <= 0:
            continue
        own_line = [i for i, (_f, raw) in enumerate(normalized) if counts[i] and _on_own_line(raw, line)]
        rest = [i for i, n in enumerate(counts) if n and i not in set(own_line)]
        for i in own_line + rest:
            if excess <= 0:
                break
            flagged.add(i)
            excess -= counts[i]
    whole = [padded(c.text) for c in chunks]
    for tail, number, head in found.breaks:
        if not tail or not head:
            continue
        between = re.compile(f" {re.escape(tail)} (?:\\S+ ){{0,12}}{number} (?:\\S+ ){{0,12}}{re.escape(head)} ")
        for i, text in enumerate(whole):
            if f" {tail} " in text and f" {head} " in text and between.search(text):
                flagged.add(i)
    return flagged


def _on_own_line(raw: str, line: str) -> bool:
    return any(norm(part) == line for part in raw.splitlines())


# -- search queries ---------------------------------------------------------------------


def sentences(raw_paragraphs: Iterable[str]) -> Iterable[str]:
    for paragraph in raw_paragraphs:
        for sentence in _SENTENCE_END.split(paragraph):
            if len(norm(sentence).split()) >= MIN_SENTENCE_WORDS:
                yield sentence
