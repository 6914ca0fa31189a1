"""The corpus, the chunks and the judgment of bench/passage_quality.py: FAQ pages of Debian
documentation packages kept whole, each question's answer a passage inside its page.

Sets: bench/faqcorpus.py's, but `debian` (debian-faq is held out by issue 59): celery,
cryptography, jinja2, requests, scrapy, sqlalchemy. Fetched into the same cache by
faqcorpus.set_pages (`apt-get download` + `dpkg-deb -x`); nothing downloaded is committed.
Held out as there: python3-doc, python-django-doc, git-doc.

The folder (`load()`, built once as `faq-long-pages` in sphinxindex's cache):

  long/<set>/<path>    each FAQ page with a question, whole: every question heading removed
                       (with its permalink), and every link whose text is a question (the
                       page's local table of contents, the sidebar's); the answers stay in
                       place. A question still in the page's text is counted (`verbatim`)
  pages/<set>/<path>   distractors: the set's other pages (FAQ pages without a question
                       too), copied as is; one that lists a question as a heading or in a
                       table of contents is dropped (faqcorpus.listed_questions)
  questions.json       the questions: text, answer text, page, set; and the counts

Questions are faqcorpus's (a section heading ending in "?"; the answer the section's body
without nested question sections); answers under faqcorpus.MIN_WORDS words and repeated
question texts are not asked (their headings are removed all the same).

Judgment (`Judge`), the same for every system: text is compared as lower-case word tokens
(\\w+). A passage token lies in the answer when one of the passage's SHINGLE-token runs
covering it is also a run of the answer (so common words alone never match, and markup or
whitespace differences between parsers do not matter); the answer's tokens in the passage
likewise. A passage is relevant when at least SHARE of its tokens lie in the answer (it is
mostly answer: a long answer spans several chunks) or SHARE of the answer's tokens lie in
the passage (it holds most of a short answer). Passages under SHINGLE tokens never count.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import faqcorpus
import sphinxindex
from bs4 import BeautifulSoup, NavigableString, Tag

from ingestion_pipeline.processing.chunking import split_text
from ingestion_pipeline.processing.model import ChunkingOptions

SETS = tuple(name for name in sorted(faqcorpus.PACKAGES) if name != "debian")  # debian-faq: held out (issue 59)
FOLDER = sphinxindex.CACHE / "faq-long-pages"
MANIFEST = "questions.json"
SHINGLE, SHARE = 5, 0.5
CHUNKING = ChunkingOptions(max_chars=1000, overlap_chars=100)
BLOCKS = ["p", "pre", "li", "dt", "dd", "div", "section", "table", "tr", "blockquote", *(f"h{i}" for i in range(1, 7))]
WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Question:
    text: str
    answer: str  # the answer's text
    page: str  # the FAQ page holding it, relative to the folder
    package: str  # a name of SETS


@dataclass(frozen=True)
class Chunk:
    page: str  # its page, relative to the folder
    title: str  # the page's <title>
    text: str


@dataclass
class LongCorpus:
    folder: Path
    files: list[Path]  # every file to index, in path order
    questions: list[Question]
    counts: dict[str, Counter[str]]
    chars: dict[str, int]  # each FAQ page's text length

    def name(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()


# -- building --------------------------------------------------------------------------------


def clean_page(path: Path, questions: set[str]) -> tuple[str, int]:
    """The page's HTML without question headings and question links; (html, questions left)."""
    soup = BeautifulSoup(path.read_bytes(), "lxml")
    headings = [faqcorpus.own_heading(section) for section, _ in faqcorpus.question_sections(soup)]
    for heading in headings:
        if heading is not None and not heading.decomposed:
            heading.decompose()
    for link in soup.find_all("a"):
        if isinstance(link, Tag) and not link.decomposed and faqcorpus.norm(link.get_text(" ")) in questions:
            link.decompose()
    text = faqcorpus.norm(soup.get_text(" "))
    return str(soup), sum(question in text for question in questions)


def answer_text(html: str, questions: set[str]) -> str:
    """The answer's text as its cleaned page shows it: without links whose text is a question."""
    soup = BeautifulSoup(html, "lxml")
    for link in soup.find_all("a"):
        if isinstance(link, Tag) and not link.decomposed and faqcorpus.norm(link.get_text(" ")) in questions:
            link.decompose()
    return " ".join(soup.get_text(" ").split())


def build(folder: Path) -> None:
    """Write the whole folder: into a sibling first, renamed when complete."""
    out = folder.with_name(folder.name + ".partial")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sets = {name: faqcorpus.set_pages(name) for name in SETS}
    counts: dict[str, Counter[str]] = {name: Counter() for name in SETS}
    pairs = {name: {page: faqcorpus.faq_pairs(page) for page in faq} for name, (_s, faq, _o) in sets.items()}
    every = {pair.question for found in pairs.values() for page in found.values() for pair in page}
    asked: list[Question] = []
    seen: set[str] = set()
    for name, (source, _faq, others) in sets.items():
        for page, found in pairs[name].items():
            if not found:
                others.append(page)  # an FAQ page without a question is one more distractor
                continue
            counts[name]["faq pages"] += 1
            relative = f"long/{name}/{page.relative_to(source).as_posix()}"
            for pair in found:
                answer = answer_text(pair.html, every)
                if len(answer.split()) < faqcorpus.MIN_WORDS:
                    counts[name][faqcorpus.SHORT] += 1
                elif pair.question in seen:
                    counts[name][faqcorpus.DUPLICATE] += 1
                else:
                    asked.append(Question(pair.question, answer, relative, name))
                    counts[name]["questions"] += 1
                seen.add(pair.question)
            html, left = clean_page(page, every)
            counts[name]["verbatim"] += left
            target = out / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(html, encoding="utf-8")
        counts[name].update(faqcorpus.add_distractors(out, name, source, sorted(others), every))
    manifest = {"questions": [asdict(q) for q in asked], "counts": counts}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    out.rename(folder)


def load(folder: Path | None = None) -> LongCorpus:
    """The question set, built into `folder` (default FOLDER) when missing."""
    folder = folder or FOLDER
    if not (folder / MANIFEST).is_file():
        if folder.exists():
            raise SystemExit(f"{folder} exists without {MANIFEST}: not a built question set (remove it)")
        build(folder)
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    questions = [Question(**q) for q in manifest["questions"]]
    counts = {name: Counter(count) for name, count in manifest["counts"].items()}
    files = sorted(p for p in folder.rglob("*.html") if p.parts[len(folder.parts)] in {"long", "pages"})
    corpus = LongCorpus(folder, files, questions, counts, {})
    corpus.chars = {corpus.name(p): len(page_text(p)[1]) for p in files if corpus.name(p).startswith("long/")}
    per_set = ", ".join(f"{name} {count['questions']}" for name, count in sorted(counts.items()))
    print(
        f"long-page questions: {len(questions)} ({per_set}) in {len(corpus.chars)} FAQ pages"
        f" ({min(corpus.chars.values())}-{max(corpus.chars.values())} characters), {len(files)} documents",
        file=sys.stderr,
    )
    return corpus


# -- the baselines' chunks -------------------------------------------------------------------


def page_text(path: Path) -> tuple[str, str]:
    """(title, main text) of a page: Sphinx's div.body (else <body>), a blank line between blocks."""
    soup = BeautifulSoup(path.read_bytes(), "lxml")
    title = " ".join(soup.title.get_text(" ").split()) if soup.title else ""
    main = soup.select_one("div.body") or soup.body or soup
    for tag in main.select("a.headerlink, script, style"):
        tag.decompose()
    for tag in main.find_all(BLOCKS):
        tag.insert_before(NavigableString("\n\n"))
        tag.insert_after(NavigableString("\n\n"))
    blocks = (" ".join(block.split()) for block in re.split(r"\n\s*\n", main.get_text("")))
    return title, "\n\n".join(block for block in blocks if block)


def chunks(corpus: LongCorpus, files: list[Path] | None = None) -> list[Chunk]:
    """Every page's text cut by the project's chunker into CHUNKING-sized passages."""
    found = []
    for path in files or corpus.files:
        title, text = page_text(path)
        found += [Chunk(corpus.name(path), title, piece) for piece in split_text(text, CHUNKING)]
    return found


# -- the judgment ----------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def shingles(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def covered(words: list[str], runs: set[tuple[str, ...]]) -> int:
    """How many of `words` lie in a SHINGLE-token run that is in `runs`."""
    inside = [False] * len(words)
    for i in range(len(words) - SHINGLE + 1):
        if tuple(words[i : i + SHINGLE]) in runs:
            inside[i : i + SHINGLE] = [True] * SHINGLE
    return sum(inside)


class Judge:
    """Whether a passage answers the question (the module's rule)."""

    def __init__(self, answer: str) -> None:
        self.words = tokens(answer)
        self.runs = shingles(self.words)

    def __call__(self, passage: str) -> bool:
        words = tokens(passage)
        if len(words) < SHINGLE or not self.runs:
            return False
        if covered(words, self.runs) >= SHARE * len(words):
            return True
        return covered(self.words, shingles(words)) >= SHARE * len(self.words)


def main() -> None:
    corpus = load()
    columns = ("faq pages", "questions", faqcorpus.SHORT, faqcorpus.DUPLICATE, "verbatim", "distractors")
    print(f"{'set':<14}" + "".join(f"{c:>14}" for c in (*columns, faqcorpus.DROPPED)))
    for name, count in sorted(corpus.counts.items()):
        print(f"{name:<14}" + "".join(f"{count[c]:>14}" for c in (*columns, faqcorpus.DROPPED)))
    for page, chars in sorted(corpus.chars.items(), key=lambda item: -item[1]):
        print(f"  {chars:>7} characters  {page}")


if __name__ == "__main__":
    main()
