"""What the commands print (issue 48, item 6): `show` of a deleted document says when it
was deleted and how to see its versions; search does not repeat a title that is also the
first heading; keys of files with spaces or letters beyond ASCII print decoded (their
stored keys, and --json, stay percent-encoded), and the printed form is taken back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest


def run(capsys, db_url: str, *args: str, expect: int = 0) -> str:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == expect, out + err
    return out


@pytest.fixture
def guide(db_url, tmp_path, capsys) -> Path:
    """An indexed Markdown page, `my notes/café guide.md`, whose first heading is its title."""
    folder = tmp_path / "my notes"
    folder.mkdir()
    page = folder / "café guide.md"
    page.write_text(
        "# Café guide\n\nHow the espresso machine is cleaned.\n\n"
        "## Grinders\n\nThe burr grinder is brushed every evening.\n"
    )
    run(capsys, db_url, "enqueue", str(page))
    run(capsys, db_url, "work", "--drain")
    return page


def test_search_prints_decoded_paths_and_no_repeated_title(db_url, guide, capsys):
    for query, headings in (("burr grinder", "Café guide › Grinders"), ("espresso machine", "Café guide")):
        out = run(capsys, db_url, "search", query, "--mode", "lexical", "--limit", "1")
        first = out.splitlines()[0]
        assert re.fullmatch(rf"\d+\.\d{{3}}  {headings}  \(file://{re.escape(str(guide))}\)", first), out
        assert "Café guide › Café guide" not in out and "%20" not in out
    [hit] = json.loads(run(capsys, db_url, "search", "burr grinder", "--json", "--limit", "1"))
    assert hit["source_uri"] == guide.as_uri() and "my%20notes/caf%C3%A9%20guide.md" in hit["source_uri"]


def test_the_printed_key_is_taken_back(db_url, guide, capsys):
    printed = f"file://{guide}"  # as search and show print it
    out = run(capsys, db_url, "show", printed)
    assert out.splitlines()[0].endswith(f"{printed}  (collection default)")
    assert "deleted" in run(capsys, db_url, "delete", printed)


def test_show_of_a_deleted_document_says_when_and_how_to_see_its_versions(db_url, guide, capsys):
    document_id = json.loads(run(capsys, db_url, "show", str(guide), "--json"))["document"]["document_id"]
    run(capsys, db_url, "delete", str(guide))
    [line] = run(capsys, db_url, "show", str(guide), expect=1).splitlines()
    assert re.fullmatch(
        rf"no live document file://{re.escape(str(guide))} in collection 'default': it was deleted at "
        rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(`ingest show {document_id}` lists its versions; "
        r"enqueue the file again to bring it back\)",
        line,
    ), line
    answer = json.loads(run(capsys, db_url, "show", str(guide), "--json", expect=1))
    assert (answer["ok"], answer["reason"], answer["deleted_document"]["document_id"]) == (
        False,
        "not_found",
        document_id,
    )
    history = run(capsys, db_url, "show", document_id)
    assert "deleted at " in history and "indexed" in history  # its versions, as the hint says
    # a key that never had a document says so, as before
    assert run(capsys, db_url, "show", str(guide.parent / "other.md"), expect=1).startswith("no document file://")


def test_a_dry_run_lists_decoded_keys(db_url, tmp_path, capsys):
    folder = tmp_path / "shared docs"
    folder.mkdir()
    (folder / "naïve plan.txt").write_text("A plan.\n")
    out = run(capsys, db_url, "sync", str(folder), "--dry-run")
    assert f"file://{folder / 'naïve plan.txt'}" in out and "%20" not in out
