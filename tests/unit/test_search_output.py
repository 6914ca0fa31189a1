"""The headings `ingest search` prints after a hit's title (issue 48 item 6): the heading
path without leading headings that only repeat the title."""

from __future__ import annotations

from uuid import uuid4

import pytest

from ingestion_pipeline.cli.search import headings_below_title
from ingestion_pipeline.search import Hit


def hit(title: str, heading: str | None, heading_path: str | None) -> Hit:
    return Hit(uuid4(), title, "a.md", None, heading, 0, 1.0, "", heading_path=heading_path)


@pytest.mark.parametrize(
    ("title", "heading", "path", "shown"),
    [
        ("Guide", "Guide", "Guide", []),  # the first section, whose heading is the title
        ("Guide", "Install", "Guide › Install", ["Install"]),
        ("Café  guide", "Setup", "café guide › Setup", ["Setup"]),  # case and spacing aside
        ("Guide", "Install", "Manual › Install", ["Manual", "Install"]),  # another first heading
        ("Guide", "Install", None, ["Install"]),  # a chunk without its path (older index)
        ("Guide", "Guide", None, []),
        ("Guide", None, None, []),
    ],
)
def test_the_title_is_not_repeated(title, heading, path, shown):
    assert headings_below_title(hit(title, heading, path)) == shown
