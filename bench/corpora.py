"""The documentation sets the search benchmarks run on, each with judgments its authors wrote
(bench/search_quality.py, bench/search_latency.py):

  postgres    the PostgreSQL 15 manual, judged by its back-of-book index (bench/bookindex.py)
  sphinx      Sphinx 5.3's manual, judged by its general index (bench/sphinxindex.py)
  sqlalchemy  SQLAlchemy 1.4's documentation, judged by its general index

None of them is committed; each comes from a Debian documentation package. `python3-doc` is
held out for independent evaluation: never add it here. FAQ pages judge questions, not index
terms: they are bench/faqcorpus.py's (whose held-out FAQs are python3-doc's, Django's, git's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import bookindex
import sphinxindex
from bookindex import Judgments, Page

NAMES = ("postgres", "sphinx", "sqlalchemy")


@dataclass
class Corpus:
    name: str
    folder: Path  # the html folder; a page's name is its path relative to it
    files: list[Path]
    judged: Judgments

    def page_name(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()

    def pages(self) -> list[Page]:
        if self.name == "postgres":
            return bookindex.read_pages(self.files)
        return sphinxindex.read_pages(self.folder, self.files)


def load(name: str, manual: Path = bookindex.MANUAL) -> Corpus:
    """The named set, fetched when missing (the manual with apt-get as root, the Sphinx sets
    with `apt-get download` into the user's cache)."""
    if name == "postgres":
        folder = bookindex.manual_folder(manual, install=manual == bookindex.MANUAL)
        files = bookindex.page_files(folder)
        return Corpus(name, folder, files, bookindex.read_judgments(folder, {p.name for p in files}))
    if name not in sphinxindex.PACKAGES:
        raise SystemExit(f"unknown corpus {name!r}: one of {', '.join(NAMES)}")
    folder = sphinxindex.html_folder(sphinxindex.PACKAGES[name])
    files = sphinxindex.page_files(folder)
    judged = sphinxindex.read_judgments(folder, {sphinxindex.page_name(folder, p) for p in files})
    return Corpus(name, folder, files, judged)
