"""No silent typos (issue 48, item 5): a collection that does not exist is one line and
exit 1 wherever a collection is read; an enqueue or a sync that creates one says so."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.errors import UnknownCollection
from ingestion_pipeline.search import Reader, search

ALICE = "0b6f8a52-6d3c-4c8e-9a51-2f0d3c1e7a11"
NO_SUCH = "ingest: error: no collection 'nosuch': `ingest collection add nosuch` creates it"


def run(capsys, db_url: str, *args: str, expect: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == expect, out + err
    return out, err


@pytest.fixture
def indexed(db_url, tmp_path, capsys) -> Path:
    """One document in collection `team-a`, indexed."""
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "otter.txt").write_text("The otter of team a swims.\n")
    run(capsys, db_url, "enqueue", str(folder), "--collection", "team-a")
    run(capsys, db_url, "work", "--drain")
    return folder / "otter.txt"


@pytest.mark.parametrize(
    "command",
    [
        ["search", "otter", "--collection", "nosuch"],
        ["search", "otter", "--collection", "team-a", "--collection", "nosuch", "--json"],
        ["search", "otter", "--collection", "nosuch", "--as-anon"],
        ["search", "otter", "--collection", "nosuch", "--as-user", ALICE],
        ["status", "--collection", "nosuch"],
        ["status", "--collection", "nosuch", "--json"],
        ["show", "{file}", "--collection", "nosuch"],
        ["reindex", "--all", "--collection", "nosuch"],
        ["reindex", "{file}", "--collection", "nosuch"],
        ["delete", "{file}", "--collection", "nosuch"],
        ["delete", "--source", "otter.txt", "--collection", "nosuch"],
        ["collection", "revoke", "nosuch", ALICE],
        ["collection", "grant", "nosuch", ALICE],
    ],
    ids=lambda command: " ".join(word for word in command if word != ALICE),
)
def test_an_unknown_collection_is_one_line_and_exit_1(indexed, db_url, capsys, command):
    out, err = run(capsys, db_url, *(word.format(file=indexed) for word in command), expect=1)
    assert out == ""
    [line] = err.splitlines()
    assert line == f"{NO_SUCH} (`ingest collection list` shows them)"
    # nothing was done: the document is still there, indexed, and not queued again
    shown, _ = run(capsys, db_url, "show", str(indexed), "--collection", "team-a", "--json")
    assert json.loads(shown)["document"]["status"] == "indexed"
    status, _ = run(capsys, db_url, "status", "--json")
    assert [b["total_files"] for b in json.loads(status)["batches"]] == [1]


def test_a_known_collection_still_reads_and_the_default_needs_no_row(db_url, indexed, capsys):
    """`--collection team-a` reads as before; commands that name no collection do not
    require one (a fresh database has no `default` row until something is enqueued there)."""
    out, _ = run(capsys, db_url, "search", "otter", "--collection", "team-a", "--json")
    assert [hit["collection"] for hit in json.loads(out)] == ["team-a"]
    out, _ = run(capsys, db_url, "status", "--collection", "team-a", "--json")
    assert len(json.loads(out)["batches"]) == 1
    out, _ = run(capsys, db_url, "show", str(indexed), expect=1)
    assert out.startswith("no document ") and out.rstrip().endswith("in collection 'default'")
    assert "collection team-a" in run(capsys, db_url, "search", "otter")[0]


def test_search_from_python_refuses_an_unknown_collection_for_the_owner_only(db_url, indexed):
    """The owner's search raises UnknownCollection; an app's reader is not told which
    collections exist (SPEC §10): an unknown and an unreadable collection both give nothing."""
    with connect(db_url) as conn:
        with pytest.raises(UnknownCollection, match="no collection 'nosuch'"):
            search(conn, "otter", collections=["team-a", "nosuch"])
        assert [hit.collection for hit in search(conn, "otter", collections=["team-a"])] == ["team-a"]
        for reader in (Reader(), Reader(UUID(ALICE))):
            assert search(conn, "otter", collections=["nosuch"], reader=reader) == []
            assert search(conn, "otter", collections=["team-a"], reader=reader) == []  # private


def test_enqueue_into_a_new_collection_says_it_created_it(db_url, tmp_path, capsys):
    (tmp_path / "note.txt").write_text("A note for pricing.\n")
    out, err = run(capsys, db_url, "enqueue", str(tmp_path / "note.txt"), "--collection", "pricnig")
    assert err.splitlines() == ["ingest: created collection 'pricnig'"]
    assert "new" in out
    # the second time the collection exists: nothing said
    (tmp_path / "other.txt").write_text("Another note.\n")
    _, err = run(capsys, db_url, "enqueue", str(tmp_path / "other.txt"), "--collection", "pricnig", "--json")
    assert err == ""
    # an enqueue that is refused creates nothing and says nothing of a collection
    _, err = run(capsys, db_url, "enqueue", str(tmp_path / "missing.txt"), "--collection", "nothing-yet", expect=1)
    assert err.splitlines() == [
        f"ingest: error: nothing was enqueued: {tmp_path / 'missing.txt'}: no such file or folder"
    ]
    out, _ = run(capsys, db_url, "collection", "list", "--json")
    assert [c["name"] for c in json.loads(out)] == ["pricnig"]


def test_sync_into_a_new_collection_says_it_created_it(db_url, tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Alpha.\n")
    _, err = run(capsys, db_url, "sync", str(tmp_path / "docs"), "--collection", "handbok", "--dry-run")
    assert err == ""  # a dry run writes nothing
    _, err = run(capsys, db_url, "sync", str(tmp_path / "docs"), "--collection", "handbok")
    assert err.splitlines() == ["ingest: created collection 'handbok'"]
    _, err = run(capsys, db_url, "source", "add", "manual", str(tmp_path / "docs"), "--collection", "manual")
    assert err.splitlines() == ["ingest: collection 'manual' does not exist yet: the first sync of manual creates it"]
    _, err = run(capsys, db_url, "source", "sync", "manual")
    assert err.splitlines() == ["ingest: created collection 'manual'"]
    _, err = run(capsys, db_url, "source", "sync", "manual")
    assert err == ""
    _, err = run(capsys, db_url, "source", "add", "again", str(tmp_path / "docs"), "--collection", "manual")
    assert err == ""  # the collection exists


# -- ingest collection remove ---------------------------------------------------------------


def collection_names(capsys, db_url: str) -> list[str]:
    out, _ = run(capsys, db_url, "collection", "list", "--json")
    return [c["name"] for c in json.loads(out)]


def error_line(capsys, db_url: str, *args: str) -> str:
    """The one line a refused command printed (exit 1, nothing on stdout)."""
    out, err = run(capsys, db_url, *args, expect=1)
    assert out == ""
    [line] = err.splitlines()
    return line


def test_remove_an_empty_collection_and_its_members(db_url, capsys):
    run(capsys, db_url, "collection", "add", "typo")
    run(capsys, db_url, "collection", "grant", "typo", ALICE)
    out, err = run(capsys, db_url, "collection", "remove", "typo")
    assert (out, err) == ("collection typo removed (1 membership(s) removed)\n", "")
    assert collection_names(capsys, db_url) == []
    assert error_line(capsys, db_url, "collection", "remove", "typo") == (
        "ingest: error: no collection 'typo': `ingest collection add typo` creates it "
        "(`ingest collection list` shows them)"
    )


def test_remove_refuses_a_collection_with_documents_unless_told_to_delete_them(db_url, indexed, capsys):
    assert error_line(capsys, db_url, "collection", "remove", "team-a") == (
        "ingest: error: collection 'team-a' not removed: it has 1 document(s) "
        "(`ingest collection remove team-a --delete-documents` deletes them with it)"
    )
    assert collection_names(capsys, db_url) == ["team-a"]
    assert "collection team-a" in run(capsys, db_url, "search", "otter")[0]  # still searchable

    out, _ = run(capsys, db_url, "collection", "remove", "team-a", "--delete-documents")
    assert out == "collection team-a removed (1 document(s) deleted)\n"
    assert collection_names(capsys, db_url) == []
    assert run(capsys, db_url, "search", "otter")[0] == "no results\n"
    # deleted through delete_document, as `ingest delete` does: the document is `deleted`
    with connect(db_url) as conn:
        row = conn.execute("select status, deleted_at from documents").fetchone()
    assert row["status"] == "deleted" and row["deleted_at"] is not None
    # the name can be used again: the enqueue says it created it
    _, err = run(capsys, db_url, "enqueue", str(indexed), "--collection", "team-a")
    assert err.splitlines() == ["ingest: created collection 'team-a'"]


def test_remove_refuses_a_collection_a_source_syncs_into(db_url, indexed, capsys):
    run(capsys, db_url, "source", "add", "otters", str(indexed.parent), "--collection", "team-a")
    for flags in ([], ["--delete-documents"]):
        assert error_line(capsys, db_url, "collection", "remove", "team-a", *flags) == (
            "ingest: error: collection 'team-a' not removed: registered source(s) otters sync into it "
            "(`ingest source remove otters` first)"
        )
    assert "collection team-a" in run(capsys, db_url, "search", "otter")[0]  # nothing was deleted
    run(capsys, db_url, "source", "remove", "otters")
    run(capsys, db_url, "collection", "remove", "team-a", "--delete-documents")
    assert collection_names(capsys, db_url) == []
