"""The PostgreSQL 15 manual as a search benchmark (bench/search_quality.py): where its HTML
is, its pages as plain text, and judgments read from its back-of-book index.

The manual is the HTML of Debian's `postgresql-doc-15` package; nothing of it is committed.
`manual_folder()` finds it, installs it with apt-get when missing and running as root, and
otherwise exits with a line saying how to get it.

Judgments: `bookindex.html` is a nest of <dl> lists; each <dt> is an index entry (a term, or
under a term a subterm, or a third level) followed by links to the pages that discuss it.
An entry's query is its term path joined by spaces ("alias in the FROM clause"); its relevant
pages are the files its links point to, anchors dropped. Entries with no page links ("see"
references to other entries, terms that only head subterms), links to pages outside the
corpus, queries with no letter or digit ("$", "::") and repeated query texts are left out
and counted (`Judgments.excluded`); the same query text under two entries is one query with
the union of their pages.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bs4 import BeautifulSoup, Tag, XMLParsedAsHTMLWarning

warnings.filterwarnings("ignore", category=XMLParsedAsHTMLWarning)  # the pages are XHTML; read as HTML

PACKAGE = "postgresql-doc-15"
MANUAL = Path("/usr/share/doc/postgresql-doc-15/html")
INDEX_PAGE = "bookindex.html"  # not a corpus page: it names every term and would match every query


@dataclass(frozen=True)
class Judgment:
    query: str
    relevant: frozenset[str]  # page file names ("sql-vacuum.html")
    kind: str  # single word, multi-word, identifier


@dataclass
class Judgments:
    entries: int = 0  # index entries read (every <dt>)
    queries: list[Judgment] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Page:
    name: str  # the file name, as a hit's source name
    title: str
    body: str


# -- the manual ------------------------------------------------------------------------


def manual_folder(folder: Path = MANUAL, install: bool = True) -> Path:
    """The manual's HTML folder, installed with apt-get when missing (as root only)."""
    if (folder / INDEX_PAGE).is_file():
        return folder
    how = f"sudo apt-get install {PACKAGE} (Debian/Ubuntu), or pass --manual DIR (its html folder)"
    if not install or os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SystemExit(f"the PostgreSQL 15 manual is not at {folder}: {how}")
    print(f"installing {PACKAGE} with apt-get", file=sys.stderr, flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", PACKAGE]):
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=False).returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {how}")
    if not (folder / INDEX_PAGE).is_file():
        raise SystemExit(f"{PACKAGE} is installed but {folder / INDEX_PAGE} is missing: {how}")
    return folder


def page_files(folder: Path) -> list[Path]:
    """Every HTML page of the manual but the back-of-book index, in name order."""
    return sorted(p for p in folder.glob("*.html") if p.name != INDEX_PAGE)


def read_pages(files: list[Path]) -> list[Page]:
    """Each page's <title> and the text of its <body> (its navigation included)."""
    pages = []
    for path in files:
        soup = BeautifulSoup(path.read_bytes(), "lxml")
        title = soup.title.get_text(" ", strip=True) if soup.title else ""
        body = (soup.body or soup).get_text(" ", strip=True)
        pages.append(Page(path.name, title, body))
    return pages


# -- judgments -------------------------------------------------------------------------


def read_judgments(folder: Path, corpus: set[str]) -> Judgments:
    """Every usable index entry of the manual's back-of-book index as a query."""
    soup = BeautifulSoup((folder / INDEX_PAGE).read_bytes(), "lxml")
    found = Judgments()
    pages_of: dict[str, set[str]] = {}
    for outer in soup.select("div.indexdiv > dl"):
        _walk(outer, [], found, corpus, pages_of)
    for text in sorted(pages_of):
        found.queries.append(Judgment(text, frozenset(pages_of[text]), query_kind(text)))
    return found


def _walk(dl: Tag, above: list[str], found: Judgments, corpus: set[str], pages_of: dict[str, set[str]]) -> None:
    """The entries of one <dl>, then each one's subentries (its next <dd>)."""
    for dt in dl.find_all("dt", recursive=False):
        found.entries += 1
        path = [*above, _term(dt)]
        _judge(dt, " ".join(path), found, corpus, pages_of)
        dd = dt.find_next_sibling()
        if dd is not None and dd.name == "dd" and (inner := dd.find("dl")) is not None:
            _walk(inner, path, found, corpus, pages_of)


def _term(dt: Tag) -> str:
    """The entry's own words: its text before the first link ("ALL, <a>…" → "ALL")."""
    words = []
    for node in dt.children:
        if isinstance(node, Tag):
            break
        words.append(str(node))
    text = re.sub(r"\s+", " ", "".join(words)).strip()
    return re.sub(r"\s*\(see\s*$", "", text).rstrip(", ").strip()


def _judge(dt: Tag, query: str, found: Judgments, corpus: set[str], pages_of: dict[str, set[str]]) -> None:
    hrefs = [a.get("href", "") for a in dt.find_all("a", recursive=False)]
    pages = {h.split("#", 1)[0] for h in hrefs if h and not h.startswith("#")}
    if not pages:
        found.excluded["no page link (a see-reference, or a heading of subentries)"] += 1
    elif not pages & corpus:
        found.excluded["every link points to a page not in the corpus"] += 1
    elif not re.search(r"\w", query):
        found.excluded["no letter or digit in the query"] += 1
    else:
        if query in pages_of:
            found.excluded["same query text as an earlier entry (pages merged)"] += 1
        pages_of.setdefault(query, set()).update(pages & corpus)


def query_kind(text: str) -> str:
    """identifier (has `_` or a digit: pg_am, to_number, bit_length), else single word or
    multi-word."""
    if re.search(r"[_\d]", text):
        return "identifier"
    return "multi-word" if len(text.split()) > 1 else "single word"


def sample(judgments: list[Judgment], count: int, seed: int) -> list[Judgment]:
    """`count` queries drawn without replacement (all of them when fewer), in drawn order."""
    ordered = sorted(judgments, key=lambda j: j.query)
    return random.Random(seed).sample(ordered, min(count, len(ordered)))
