"""Which files of a folder are documents (issue 61, item 2), without a database: the suffix
table covers every format the parsers read and names nothing else, and the globs choose."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ingestion_pipeline.operations.selection import EXCLUDED, NOT_INCLUDED, PassedOver, Selection
from ingestion_pipeline.processing.detect import FORMAT_NAMES, detect_type
from ingestion_pipeline.processing.suffixes import DOCUMENT_SUFFIXES, kind_of


def test_every_format_has_a_suffix_and_every_suffix_is_a_format() -> None:
    assert set(DOCUMENT_SUFFIXES.values()) == set(FORMAT_NAMES.values())


@pytest.mark.parametrize("suffix", [s for s, name in DOCUMENT_SUFFIXES.items() if name in ("text", "Markdown", "HTML")])
def test_a_text_suffix_is_read_as_its_format(suffix: str) -> None:
    """The bytes decide, and for plain text the name agrees with the table."""
    expected = {"text": "text/plain", "Markdown": "text/markdown", "HTML": "text/html"}[DOCUMENT_SUFFIXES[suffix]]
    assert detect_type(b"Some words.\n", f"note{suffix}") == expected


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("index.html", None),
        ("Report.PDF", None),
        ("deep/a/notes.md", None),
        ("stylesheet.css", ("stylesheet", "stylesheets")),
        ("js/app.min.js", ("script", "scripts")),
        ("images/figure.svg", ("SVG image", "SVG images")),
        ("LICENSE", ("file without a suffix", "files without a suffix")),
        ("data.json", (".json file", ".json files")),
    ],
)
def test_by_default_the_documents_are_taken(path: str, kind: tuple[str, str] | None) -> None:
    assert Selection().passed_over(path) == kind


def test_globs_match_a_name_or_a_path_and_ignore_case() -> None:
    chosen = Selection.of(include=["*.css", "Images/*"], exclude="images/private-*")
    assert chosen.passed_over("deep/site.CSS") is None
    assert chosen.passed_over("images/figure.svg") is None
    assert chosen.passed_over("images/private-1.svg") == EXCLUDED
    assert chosen.passed_over("index.html") == NOT_INCLUDED
    assert Selection.of(exclude=["*.md"]).passed_over("a/b.md") == EXCLUDED
    assert Selection.of(include="*").passed_over("LICENSE") is None


def test_the_count_reads_as_a_sentence() -> None:
    passed = PassedOver()
    for name in ("a.svg", "b.svg", "c.svg", "s.css", "x.json", "y.json"):
        passed.add(kind_of(name))
    assert str(passed) == "3 SVG images, 2 .json files, 1 stylesheet"
    assert passed.by_kind() == {"SVG image": 3, ".json file": 2, "stylesheet": 1} and passed.total == 6


def test_the_processing_page_lists_the_suffixes_taken() -> None:
    page = (Path(__file__).parents[2] / "docs" / "processing.md").read_text()
    paragraph = page[page.index("Of a folder (") :].split("\n\n")[0]
    assert set(re.findall(r"`(\.\w+)`", paragraph)) == set(DOCUMENT_SUFFIXES)
