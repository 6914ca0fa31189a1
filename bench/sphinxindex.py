"""A Sphinx-built documentation set as a search benchmark (bench/search_quality.py): its pages
as plain text, and judgments read from its general index (`genindex.html`).

The sets are Debian documentation packages (nothing of them is committed), unpacked with
`apt-get download` + `dpkg-deb -x` into a cache folder, so no root and no install is needed:

  sphinx-doc              Sphinx 5.3's own manual (its general index lists directives, roles,
                          config values, API names, command-line options)
  python-sqlalchemy-doc   SQLAlchemy 1.4's documentation (API names with their qualifiers)

Pages: every HTML file of the set but the generated ones (the general index, the search page,
the module index, highlighted source under `_modules/`, `_static/`, `_sources/`); a page's
name is its path inside the html folder ("orm/session_api.html").

Judgments: each entry of the general index is a query, written as the index shows it
("add_directive() (sphinx.application.Sphinx method)", "--author"); an entry nested under
another (a second location, or a sub-term) is the parent's term (its parenthesis dropped)
followed by the nested text ("--author sphinx-quickstart command line option"). Its relevant
pages are the pages its links point to, anchors dropped. Entries with no link into the corpus,
with no letter or digit, and repeated query texts (pages merged) are counted as left out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from bookindex import Judgment, Judgments, Page
from bs4 import BeautifulSoup, Tag

PACKAGES = {"sphinx": "sphinx-doc", "sqlalchemy": "python-sqlalchemy-doc"}
GENERATED = {"genindex.html", "search.html", "py-modindex.html"}
SKIPPED_FOLDERS = {"_modules", "_static", "_sources", "_images", "_downloads"}
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ingestion-pipeline-bench"


def html_folder(package: str, cache: Path = CACHE) -> Path:
    """The package's html folder, downloaded and unpacked into `cache` when missing."""
    unpacked = cache / package
    folder = unpacked / "usr" / "share" / "doc" / package / "html"
    if (folder / "genindex.html").is_file():
        return folder
    how = f"apt-get download {package} && dpkg-deb -x {package}_*.deb {unpacked}"
    cache.mkdir(parents=True, exist_ok=True)
    print(f"downloading {package} (apt-get download)", file=sys.stderr, flush=True)
    got = subprocess.run(["apt-get", "download", package], cwd=cache, capture_output=True, text=True, check=False)
    debs = sorted(cache.glob(f"{package}_*.deb"))
    if got.returncode != 0 or not debs:
        raise SystemExit(f"could not download {package}: {got.stderr.strip()[-300:]}; by hand: {how}")
    subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(unpacked)], check=True)
    if not (folder / "genindex.html").is_file():
        raise SystemExit(f"{package} has no {folder / 'genindex.html'}")
    return folder


def page_files(folder: Path) -> list[Path]:
    """The set's content pages, in path order."""
    return sorted(
        path
        for path in folder.rglob("*.html")
        if path.name not in GENERATED and not SKIPPED_FOLDERS & set(path.relative_to(folder).parts)
    )


def page_name(folder: Path, path: Path) -> str:
    return path.relative_to(folder).as_posix()


def read_pages(folder: Path, files: list[Path]) -> list[Page]:
    """Each page's <title> and the text of its main content (Sphinx's `div.body`, else <body>)."""
    pages = []
    for path in files:
        soup = BeautifulSoup(path.read_bytes(), "lxml")
        title = soup.title.get_text(" ", strip=True) if soup.title else ""
        main = soup.select_one("div.body") or soup.body or soup
        pages.append(Page(page_name(folder, path), title, main.get_text(" ", strip=True)))
    return pages


# -- judgments -------------------------------------------------------------------------


def read_judgments(folder: Path, corpus: set[str]) -> Judgments:
    """Every usable entry of the set's general index as a query."""
    soup = BeautifulSoup((folder / "genindex.html").read_bytes(), "lxml")
    found = Judgments()
    pages_of: dict[str, set[str]] = {}
    for query, hrefs in _entries(soup):
        found.entries += 1
        pages = {href.split("#", 1)[0] for href in hrefs if href and not href.startswith(("#", "http"))}
        if not pages:
            found.excluded["no page link (a heading of nested entries)"] += 1
        elif not pages & corpus:
            found.excluded["every link points to a page not in the corpus"] += 1
        elif not re.search(r"\w", query):
            found.excluded["no letter or digit in the query"] += 1
        else:
            if query in pages_of:
                found.excluded["same query text as an earlier entry (pages merged)"] += 1
            pages_of.setdefault(query, set()).update(pages & corpus)
    for text in sorted(pages_of):
        found.queries.append(Judgment(text, frozenset(pages_of[text]), query_kind(text)))
    return found


def _entries(soup: BeautifulSoup) -> Iterator[tuple[str, list[str]]]:
    """(query, hrefs) of every entry: Sphinx's default template nests <ul>/<li> in
    `table.genindextable`; some projects' templates (SQLAlchemy's) nest <dl>/<dt>/<dd>."""
    for cell in soup.select("table.genindextable td"):
        for top in cell.find_all(["ul", "dl"], recursive=False):
            nested, item = ("ul", "li") if top.name == "ul" else ("dd", "dt")
            for node in top.find_all(item, recursive=False):
                yield from _entry(node, "", nested=nested, item=item)


def _entry(node: Tag, parent: str, *, nested: str, item: str) -> Iterator[tuple[str, list[str]]]:
    own = _own_text(node, nested)
    query = f"{parent} {own}".strip() if parent else own
    yield query, [a.get("href", "") for a in node.find_all("a") if not _inside(a, node, nested)]
    for child in _children(node, item):
        yield from _entry(child, parent or re.sub(r"\s*\(.*\)\s*$", "", query), nested=nested, item=item)


def _children(node: Tag, item: str) -> list[Tag]:
    """The entries nested under `node`: its own <ul>'s items, or the <dl> of the <dd> after it."""
    if item == "li":
        holder = node.find("ul", recursive=False)
    else:
        dd = node.find_next_sibling()
        holder = dd.find("dl") if dd is not None and dd.name == "dd" else None
    return holder.find_all(item, recursive=False) if holder is not None else []


def _own_text(node: Tag, nested: str) -> str:
    parts = [
        child.get_text(" ") if isinstance(child, Tag) else str(child)
        for child in node.children
        if not (isinstance(child, Tag) and child.name == nested)
    ]
    return re.sub(r"\s+", " ", "".join(parts)).strip().rstrip(",").strip()


def _inside(a: Tag, node: Tag, nested: str) -> bool:
    """Whether the link sits in a list nested below `node` (then it is a child entry's)."""
    for parent in a.parents:
        if parent is node:
            return False
        if parent.name == nested:
            return True
    return False


def query_kind(text: str) -> str:
    """option (starts with -), qualified name (a dotted name), identifier (`_`, a digit, `()`
    or an inner capital), else single word or multi-word."""
    head = re.sub(r"\s*\(.*$", "", text)
    if head.startswith("-"):
        return "option"
    if re.search(r"\w\.\w", head):
        return "qualified name"
    if re.search(r"[_\d]|\(\)|[a-z][A-Z]", head):
        return "identifier"
    return "multi-word" if len(head.split()) > 1 else "single word"
