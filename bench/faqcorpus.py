"""A question benchmark built from the FAQ pages of Debian documentation packages: real users'
questions, each answered by exactly one document, among the other pages of the same manuals.

The judgments of bench/corpora.py come from back-of-book and general indexes: their queries are
index terms ("alias in the FROM clause"), not the questions people type. An FAQ pairs a question
with the passage that answers it, written by the project's own authors, so it judges search on
natural-language questions without anyone writing judgments by hand.

Packages (`PACKAGES`; fetched and unpacked with `apt-get download` + `dpkg-deb -x` by
bench/sphinxindex.py's `html_folder`, into the same cache, nothing committed):

  celery        python-celery-doc        faq.html
  cryptography  python-cryptography-doc  faq.html
  debian        debian-faq               the whole package is the FAQ (DocBook HTML under
                                         /usr/share/doc/debian/FAQ, one page per chapter, no
                                         genindex.html; the `*.html` symlinks to `*.en.html`
                                         are skipped): it brings questions, no distractors
  jinja2        python-jinja2-doc        faq.html
  requests      python-requests-doc      community/faq.html
  scrapy        python-scrapy-doc        faq.html
  sqlalchemy    python-sqlalchemy-doc    faq/*.html

Dropped: sphinx-doc. Its faq.html asks its questions as definition-list items under headings
("How do I…" / "… get section numbers?"), so no section heading is a question.
Held out for independent evaluation, never to be added here: python3-doc, python-django-doc and
git-doc.

Questions: in each FAQ page, every section (Sphinx's <section>, DocBook's div.section) whose own
heading ends with "?" once the "¶" permalinks and whitespace are removed (DocBook's section
number, "3.1.", is dropped too). The heading text is the question; the answer is the section's
body without its heading and without any nested question section (that one is its own pair).
Answers under 15 words and repeated question texts (the first one kept) are skipped and counted.

The indexed folder (`load()`, built once under sphinxindex's cache as `faq-questions`):

  answers/<name>/<slug>.html   one per question: <title> is the FAQ page's own title (never the
                               question), the body the answer's HTML (code blocks kept)
  pages/<name>/<path>          distractors: every other page of the same set (sphinxindex's
                               `page_files`: no genindex, search, module index, _static, ...),
                               copied as is. One that lists a question in a table of contents
                               (an index.html whose toctree reaches into the FAQ) or as a heading
                               is dropped; one that only cites a question in its prose ("See also
                               How do I render SQL expressions as strings…?") is kept and counted
  questions.json               the questions and the counts (not indexed)

No question appears as a heading in any indexed file: checked while building.
`python bench/faqcorpus.py` builds it when missing and prints the counts and sample questions.
"""

from __future__ import annotations

import copy
import html
import json
import random
import re
import shutil
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import sphinxindex
from bookindex import Page
from bs4 import BeautifulSoup, Tag

PACKAGES = {
    "celery": "python-celery-doc",
    "cryptography": "python-cryptography-doc",
    "debian": "debian-faq",
    "jinja2": "python-jinja2-doc",
    "requests": "python-requests-doc",
    "scrapy": "python-scrapy-doc",
    "sqlalchemy": "python-sqlalchemy-doc",
}
FAQ_PAGES = {  # the FAQ pages of each set: a glob inside its html folder
    "celery": "faq.html",
    "cryptography": "faq.html",
    "debian": "*.en.html",
    "jinja2": "faq.html",
    "requests": "community/faq.html",
    "scrapy": "faq.html",
    "sqlalchemy": "faq/*.html",
}
NOT_SPHINX = {"debian-faq": "usr/share/doc/debian/FAQ"}  # its html folder inside the unpacked package
HELD_OUT = frozenset({"python3-doc", "python-django-doc", "git-doc"})
MIN_WORDS = 15
FOLDER = sphinxindex.CACHE / "faq-questions"
MANIFEST = "questions.json"
HEADING = re.compile(r"^h[1-6]$")
ANSWER = (
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>{}</title></head>\n'
    "<body>\n{}\n</body>\n</html>\n"
)
SHORT, DUPLICATE, DROPPED, CITING = "short answer", "duplicate", "dropped (toc)", "citing (kept)"
TOC_LINKS = ".toctree-wrapper a, li[class*='toctree-l'] a"  # Sphinx's tables of contents


@dataclass(frozen=True)
class Question:
    text: str
    answer: str  # the answer file, relative to the folder: the one relevant document
    package: str  # a key of PACKAGES


@dataclass
class FaqCorpus:
    folder: Path
    files: list[Path]  # every file to index: answers and distractors, in path order
    pages: list[Page]  # the same files in memory (bench/baselines.py); name = path relative to folder
    questions: list[Question]
    counts: dict[str, Counter[str]]  # per package: faq pages, questions, short answer, duplicate, distractors, ...


@dataclass(frozen=True)
class Pair:
    question: str
    title: str  # the FAQ page's <title>
    html: str
    words: int


# -- the documentation sets ------------------------------------------------------------------


def doc_folder(package: str) -> Path:
    """The package's html folder, fetched by sphinxindex.html_folder when missing. That function
    unpacks a non-Sphinx set too, then refuses it for lacking genindex.html: its folder is then
    NOT_SPHINX's."""
    assert package not in HELD_OUT, f"{package} is held out for independent evaluation"
    folder = sphinxindex.CACHE / package / NOT_SPHINX.get(package, "")
    if package in NOT_SPHINX and folder.is_dir():
        return folder
    try:
        return sphinxindex.html_folder(package)
    except SystemExit:
        if package in NOT_SPHINX and folder.is_dir():
            return folder
        raise


def set_pages(name: str) -> tuple[Path, list[Path], list[Path]]:
    """(html folder, FAQ pages, every other content page) of the set, in path order."""
    source = doc_folder(PACKAGES[name])
    pages = [p for p in sphinxindex.page_files(source) if not p.is_symlink()]
    faq = sorted(p for p in source.glob(FAQ_PAGES[name]) if not p.is_symlink())
    return source, faq, [p for p in pages if p not in faq]


# -- questions and answers -------------------------------------------------------------------


def norm(text: str) -> str:
    """Whitespace collapsed, none before closing punctuation ("Why use cryptography ?" → "…y?")."""
    return re.sub(r"\s+([?!.,:;)])", r"\1", " ".join(text.split()))


def question_text(heading: Tag) -> str:
    """The heading's text when it is a question (ends with "?"), else ""."""
    text = re.sub(r"^\d+(\.\d+)*\.\s+", "", norm(heading.get_text(" ").replace("¶", "")))
    return text if text.endswith("?") else ""


def is_section(tag: Tag) -> bool:
    return tag.name == "section" or (tag.name == "div" and "section" in tag.get_attribute_list("class"))


def own_heading(section: Tag) -> Tag | None:
    """The section's own heading: its first h1–h6 not inside a nested section."""
    for heading in section.find_all(HEADING):
        if isinstance(heading, Tag) and next(p for p in heading.parents if is_section(p)) is section:
            return heading
    return None


def question_sections(root: Tag) -> list[tuple[Tag, str]]:
    """(section, question) of every section below `root` whose own heading is a question."""
    found = []
    for section in root.select("section, div.section"):
        heading = own_heading(section)
        if heading is not None and (text := question_text(heading)):
            found.append((section, text))
    return found


def answer_of(section: Tag) -> Tag:
    """A copy of the section without its heading (and the heading's wrapper: DocBook's titlepage),
    nested question sections, permalinks and back-links to the local table of contents."""
    answer = copy.copy(section)
    heading = own_heading(answer)
    assert heading is not None
    while heading.parent is not answer and heading.parent is not None:
        heading = heading.parent
    heading.decompose()
    for nested, _ in question_sections(answer):
        if not nested.decomposed:
            nested.decompose()
    for link in answer.select("a.headerlink"):
        link.decompose()
    for link in answer.select("a.toc-backref"):
        link.unwrap()
    return answer


def faq_pairs(path: Path) -> list[Pair]:
    soup = BeautifulSoup(path.read_bytes(), "lxml")
    title = norm(soup.title.get_text(" ")) if soup.title else ""
    pairs = []
    for section, question in question_sections(soup):
        answer = answer_of(section)
        body = "".join(str(node) for node in answer.contents).strip()
        pairs.append(Pair(question, title, body, len(answer.get_text(" ").split())))
    return pairs


def slug(text: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80].rstrip("-") or "question"
    name, number = base, 1
    while name in used:
        number += 1
        name = f"{base}-{number}"
    used.add(name)
    return name


# -- building the folder ---------------------------------------------------------------------


def question_headings(soup: BeautifulSoup | Tag, questions: set[str]) -> list[str]:
    return [text for h in soup.find_all(HEADING) if isinstance(h, Tag) and (text := question_text(h)) in questions]


def write_answer(out: Path, name: str, pair: Pair, used: set[str]) -> Question:
    relative = f"answers/{name}/{slug(pair.question, used)}.html"
    page = ANSWER.format(html.escape(pair.title), pair.html)
    if question_headings(BeautifulSoup(page, "lxml"), {pair.question}):
        raise SystemExit(f"{relative}: the question is still a heading of its answer")
    (out / relative).parent.mkdir(parents=True, exist_ok=True)
    (out / relative).write_text(page, encoding="utf-8")
    return Question(pair.question, relative, name)


def add_questions(out: Path, name: str, faq: list[Path], seen: set[str], count: Counter[str]) -> list[Question]:
    """The set's question/answer pairs written as answer files; short answers and questions
    already seen (in this set or an earlier one) skipped and counted."""
    kept: list[Question] = []
    used: set[str] = set()
    for pair in (pair for page in faq for pair in faq_pairs(page)):
        if pair.words < MIN_WORDS:
            count[SHORT] += 1
        elif pair.question in seen:
            count[DUPLICATE] += 1
        else:
            seen.add(pair.question)
            kept.append(write_answer(out, name, pair, used))
    count["questions"] = len(kept)
    return kept


def listed_questions(soup: BeautifulSoup, questions: set[str]) -> list[str]:
    """The questions the page shows as headings or as entries of a table of contents."""
    entries = [text for a in soup.select(TOC_LINKS) if (text := norm(a.get_text(" "))) in questions]
    return question_headings(soup, questions) + entries


def add_distractors(out: Path, name: str, source: Path, pages: list[Path], questions: set[str]) -> Counter[str]:
    """The set's other pages copied under pages/<name>/, but those listing a question."""
    count: Counter[str] = Counter()
    for path in pages:
        soup = BeautifulSoup(path.read_bytes(), "lxml")
        if listed := listed_questions(soup, questions):
            print(f"  dropped distractor {name}/{path.relative_to(source)}: lists {listed[0]!r}", file=sys.stderr)
            count[DROPPED] += 1
            continue
        text = norm(soup.get_text(" "))
        count[CITING] += any(q in text for q in questions)
        target = out / "pages" / name / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        count["distractors"] += 1
    return count


def build(folder: Path) -> None:
    """Write the whole folder: into a sibling first, renamed when complete."""
    out = folder.with_name(folder.name + ".partial")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    seen: set[str] = set()
    questions: list[Question] = []
    counts: dict[str, Counter[str]] = {}
    sets = {name: set_pages(name) for name in sorted(PACKAGES)}
    for name, (_source, faq, _others) in sets.items():
        counts[name] = Counter({"faq pages": len(faq)})
        questions += add_questions(out, name, faq, seen, counts[name])
    for name, (source, _faq, others) in sets.items():
        counts[name].update(add_distractors(out, name, source, others, seen))
    manifest = {"questions": [asdict(q) for q in questions], "counts": counts}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    out.rename(folder)


# -- loading ---------------------------------------------------------------------------------


def load(folder: Path | None = None) -> FaqCorpus:
    """The question set, built into `folder` (default: faq-questions under sphinxindex's cache)
    when missing."""
    folder = folder or FOLDER
    if not (folder / MANIFEST).is_file():
        if folder.exists():
            raise SystemExit(f"{folder} exists without {MANIFEST}: not a built question set (remove it)")
        build(folder)
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    questions = [Question(**q) for q in manifest["questions"]]
    counts = {name: Counter(count) for name, count in manifest["counts"].items()}
    files = sorted(p for p in folder.rglob("*.html") if p.parts[len(folder.parts)] in {"answers", "pages"})
    pages = sphinxindex.read_pages(folder, files)
    per_package = ", ".join(f"{name} {count['questions']}" for name, count in sorted(counts.items()))
    distractors = sum(count["distractors"] for count in counts.values())
    print(
        f"faq questions: {len(questions)} ({per_package}); answers {len(files) - distractors},"
        f" distractor pages {distractors}",
        file=sys.stderr,
    )
    return FaqCorpus(folder, files, pages, questions, counts)


def main() -> None:
    corpus = load()
    columns = ("faq pages", "questions", SHORT, DUPLICATE, "distractors", CITING, DROPPED)
    print(f"{'package':<14}" + "".join(f"{c:>14}" for c in columns))
    for name in sorted(corpus.counts):
        print(f"{name:<14}" + "".join(f"{corpus.counts[name][c]:>14}" for c in columns))
    totals = [sum(count[c] for count in corpus.counts.values()) for c in columns]
    print(f"{'total':<14}" + "".join(f"{t:>14}" for t in totals))
    size = sum(p.stat().st_size for p in corpus.files)
    print(f"\n{len(corpus.files)} files to index, {size / 1e6:.1f} MB, in {corpus.folder}\n")
    for question in random.Random(7).sample(corpus.questions, min(5, len(corpus.questions))):
        print(f"  [{question.package}] {question.text}\n      -> {question.answer}")


if __name__ == "__main__":
    main()
