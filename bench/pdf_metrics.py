"""What bench/pdf_quality.py measures (defined in its docstring; this module is their code): the
HTML twin's truth (paragraphs, table rows, headings, sentences), a text's scores against it.

Every comparison runs on `norm(text)`: NFKC (ligatures, full-width forms, special spaces),
accents dropped, case folded, soft hyphens and zero-width characters removed, every hyphen or
dash removed with the whitespace after it (`inter- cept` and `intercept` alike, `well-known`
reads `wellknown` on both sides), every other character not a letter, digit or whitespace made
a space, whitespace collapsed. Matches are of whole words: needle and text padded with a space.

Where the twin and the PDF differ and no reader errs, rules alike for every text and the HTML
keep it from counting: `©`/`®` read `c`/`r` (TeX's circled letters); a 1-2 digit number glued
after a word is cut off it (`definitions1`: a footnote mark; `x3`: a superscript); the HTML's
links, superscripts, math and images are gaps (a cross-reference's wording, a formula); a page
break may interrupt a paragraph with what the PDF prints there (find_paragraph); HTML
redirection pages are skipped, and paragraphs in no anchor's text are not counted
(mark_absent), nor are table rows no anchor prints (pdf_tables.py). Words run together or
split, lost words and reading order still count.
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
_SIGNS = {ord("\u00a9"): " c ", ord("\u00ae"): " r "}
_GLUED_NUMBER = re.compile(r"(?<=[^\W\d_])(?=\d{1,2}\b)")
_HYPHEN = re.compile(r"[-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d]\s*")
_PAGE_AFTER_HYPHEN = re.compile(f"(?<={_HYPHEN.pattern[:-3]})\\s*\f")
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
_MATH = re.compile(r"\bmath\b|MathJax", re.I)
SYNC, PAGE, INTERRUPT = 3, "\f", 400  # words matched at once; page break mark; its text's length
GAP = 200  # characters allowed between two pieces of a paragraph (a link's text, a URL, a mark)
_BLOCK_TAGS = {"p", "li", "dd", "dl", "ul", "ol", "table", "pre", "div", "blockquote", "h1", "h2", "h3", "h4"}


def norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text.translate(_SIGNS)).translate(_INVISIBLE)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    text = _HYPHEN.sub("", text.casefold())
    return " ".join(_GLUED_NUMBER.sub(" ", _NOT_WORD.sub(" ", text)).split())


def padded(text: str) -> str:
    return f" {norm(text)} "


def paged(pages: Sequence[str]) -> str:
    """Pages normalized, padded, joined by a page break mark (not after a line-end hyphen)."""
    pages = _PAGE_AFTER_HYPHEN.sub("", "\f".join(pages)).split("\f")
    return f" {f' {PAGE} '.join(n for n in map(norm, pages) if n)} "


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
    absent: set[tuple[int, int]] = field(default_factory=set)  # (file, paragraph) not in the PDF
    unprinted: set[int] = field(default_factory=set)  # rows not in the PDF (pdf_tables.mark_unprinted)

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
    """The paragraph's text outside links, superscripts, math and images, normalized, as the
    pieces those cut it into: a PDF prints a URL or page, a footnote's number, a formula there."""
    pieces, current = [], []
    for node in element.descendants:
        if isinstance(node, Tag):
            if node.name == "br":
                current.append(" ")
            elif node.name == "img":  # a formula or logo: the PDF prints text
                pieces, current = [*pieces, "".join(current)], []
        elif not isinstance(node, Comment):
            if _cut(node, element):
                pieces, current = [*pieces, "".join(current)], []
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
        if _MATH.search(" ".join(parent.get("class") or [])):  # TeX source or MathML
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
        if soup.find("meta", attrs={"http-equiv": re.compile("^refresh$", re.I)}):
            continue  # a redirection page ("The node you are looking for is at ..."), not content
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
    at most GAP characters after the previous one; (-1, -1) when they are not there. Once, and
    once more per 150 words, INTERRUPT characters holding a page break (of a paged() text: the
    running lines, page number, footnotes printed there) may stand between two of its words."""
    words = [piece.split() for piece in pieces]
    budget = 1 + sum(len(w) for w in words) // 150
    first = f" {' '.join(words[0][:SYNC])} "
    at = text.find(first, start)
    for _ in range(tries):
        if at < 0:
            break
        end, left = _run(words[0], text, at, budget)
        for piece in words[1:]:
            needle = f" {' '.join(piece[:SYNC])} "
            found = text.find(needle, end, end + GAP + len(needle)) if end >= 0 else -1
            end, left = (-1, 0) if found < 0 else _run(piece, text, found, left)
        if end >= 0:
            return at, end
        at = text.find(first, at + 1)
    return -1, -1


def _run(words: Sequence[str], text: str, at: int, budget: int) -> tuple[int, int]:
    """(end, budget left) of `words` read from `at` (a space before the first), or (-1, 0)."""
    pos = at
    for i, word in enumerate(words):
        if text.startswith(f" {word} ", pos):
            pos += len(word) + 1
            continue
        if budget <= 0 or i == 0:
            return -1, 0
        found = text.find(f" {' '.join(words[i : i + SYNC])} ", pos, pos + INTERRUPT)
        if found < 0 or PAGE not in text[pos:found]:
            return -1, 0
        budget -= 1
        pos = found + len(word) + 1
    return pos, budget


def mark_absent(truth: Truth, texts: Sequence[str]) -> None:
    """Paragraphs the PDF does not print (only the HTML has them): fewer than half of their
    3-word runs are in any of `texts`, the anchor readers' (one reader's loss still counts)."""
    for f, paragraphs in enumerate(truth.files):
        for index, pieces in enumerate(paragraphs):
            runs = [" ".join(w[i : i + 3]) for w in (p.split() for p in pieces) for i in range(max(1, len(w) - 2))]
            if not any(sum(f" {r} " in text for r in runs) * 2 >= len(runs) for text in texts):
                truth.absent.add((f, index))


def fidelity(truth: Truth, text: str) -> Fidelity:
    """`text` normalized and padded. Each HTML file's paragraphs are looked for in order: from
    the end of the previous one found (the file's first from the start); one found only before
    that is out of order (not counted) and the search goes on from it. `truth.absent`: skipped."""
    score = Fidelity()
    for f, paragraphs in enumerate(truth.files):
        cursor = 0
        for pieces in (p for i, p in enumerate(paragraphs) if (f, i) not in truth.absent):
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
