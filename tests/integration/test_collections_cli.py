"""`--collection` on status, search, delete and reindex, and documents named by key or path
(issue 31): two folders in two collections, one file name in each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest


def run(capsys, *args: str, expect: int = 0) -> str:
    capsys.readouterr()
    code = ingest(list(args))
    captured = capsys.readouterr()
    assert code == expect, captured.out + captured.err
    return captured.out


@pytest.fixture
def two_collections(db_url, tmp_path, capsys) -> tuple[list[str], Path]:
    url = ["--database-url", db_url]
    for team in ("a", "b"):
        (tmp_path / team).mkdir()
        (tmp_path / team / "README.md").write_text(f"# Readme\n\nThe otter of team {team} swims.\n")
        run(capsys, "enqueue", str(tmp_path / team), "--collection", f"team-{team}", "--batch", team, *url)
    run(capsys, "work", "--drain", *url)
    return url, tmp_path


def keys_of(hits: list[dict]) -> list[tuple[str, str]]:
    return sorted((hit["collection"], hit["source_uri"]) for hit in hits)


def test_search_by_collection(two_collections, capsys):
    url, root = two_collections
    a, b = ((root / team / "README.md").resolve().as_uri() for team in ("a", "b"))
    everywhere = json.loads(run(capsys, "search", "otter", "--json", *url))
    assert keys_of(everywhere) == [("team-a", a), ("team-b", b)]
    only_b = json.loads(run(capsys, "search", "otter", "--collection", "team-b", "--json", *url))
    assert keys_of(only_b) == [("team-b", b)]
    both = json.loads(
        run(capsys, "search", "otter", "--collection", "team-a", "--collection", "team-b", "--json", *url)
    )
    assert keys_of(both) == keys_of(everywhere)
    # a collection that does not exist is an error, not "no results" (tests/integration/test_no_silent_typos.py)
    assert run(capsys, "search", "otter", "--collection", "nobody", "--json", *url, expect=1) == ""
    assert "collection team-b" in run(capsys, "search", "otter", "--collection", "team-b", *url)


def test_status_by_collection(two_collections, capsys):
    url, _ = two_collections
    everything = json.loads(run(capsys, "status", "--json", *url))
    assert sorted(b["name"] for b in everything["batches"]) == ["a", "b"]
    only_a = json.loads(run(capsys, "status", "--collection", "team-a", "--json", *url))
    assert [(b["name"], b["completed"]) for b in only_a["batches"]] == [("a", 1)]
    assert run(capsys, "status", "--collection", "nobody", "--json", *url, expect=1) == ""
    # the whole index's totals (what Dagster's document_index shows), only when no scope is asked for
    assert "index" not in only_a
    index = everything["index"]
    assert (index["documents"], index["documents_by_status"], index["collections"]) == (2, {"indexed": 2}, 2)
    assert (index["sources"], index["failed_jobs"], index["jobs_finished"]) == (0, 0, 2) and index["chunks"] >= 2
    first_line = run(capsys, "status", *url).splitlines()[0]
    assert first_line.startswith("index: 2 document(s) (queued 0, processing 0, indexed 2, failed 0, cancelled 0), ")


def test_status_failures_of_one_collection(db_url, tmp_path, capsys):
    url = ["--database-url", db_url]
    for team in ("a", "b"):
        (tmp_path / team).mkdir()
        (tmp_path / team / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
        run(capsys, "enqueue", str(tmp_path / team), "--collection", team, "--max-attempts", "1", *url)
    run(capsys, "work", "--drain", *url)
    failures = json.loads(run(capsys, "status", "--collection", "b", "--json", *url))["failures"]
    assert [(f["collection"], f["source_key"]) for f in failures] == [
        ("b", (tmp_path / "b" / "broken.pdf").resolve().as_uri())
    ]


def test_delete_by_path_and_key_in_a_collection(two_collections, capsys):
    url, root = two_collections
    readme_b = root / "b" / "README.md"
    # the key is looked up in `default` unless told: team-b's document is not there
    refused = json.loads(run(capsys, "delete", str(readme_b), "--json", *url, expect=1))
    assert [(r["reason"], r["source_key"]) for r in refused] == [("key_not_found", readme_b.resolve().as_uri())]

    deleted = json.loads(run(capsys, "delete", str(readme_b), "--collection", "team-b", "--json", *url))
    assert [(r["ok"], r["source_key"]) for r in deleted] == [(True, readme_b.resolve().as_uri())]
    assert [h["collection"] for h in json.loads(run(capsys, "search", "otter", "--json", *url))] == ["team-a"]

    by_key = (root / "a" / "README.md").resolve().as_uri()
    assert "deleted" in run(capsys, "delete", by_key, "--collection", "team-a", *url)
    assert json.loads(run(capsys, "search", "otter", "--json", *url)) == []


def test_delete_by_name_is_scoped_by_collection(two_collections, capsys):
    url, _ = two_collections
    deleted = json.loads(run(capsys, "delete", "--source", "README.md", "--collection", "team-a", "--json", *url))
    assert len(deleted) == 1 and deleted[0]["ok"]
    assert [h["collection"] for h in json.loads(run(capsys, "search", "otter", "--json", *url))] == ["team-b"]


def test_reindex_by_collection_and_by_key(two_collections, capsys):
    url, root = two_collections
    reindexed = json.loads(run(capsys, "reindex", "--all", "--collection", "team-a", "--json", *url))
    assert reindexed["counts"] == {"reindex_queued": 1}
    run(capsys, "work", "--drain", *url)

    by_path = json.loads(
        run(capsys, "reindex", str(root / "b" / "README.md"), "--collection", "team-b", "--json", *url)
    )
    assert by_path["counts"] == {"reindex_queued": 1} and by_path["keys_not_found"] == []
    missing = json.loads(run(capsys, "reindex", str(root / "b" / "README.md"), "--json", *url, expect=1))
    assert missing["keys_not_found"] == [(root / "b" / "README.md").resolve().as_uri()]
    run(capsys, "work", "--drain", *url)
    everything = json.loads(run(capsys, "reindex", "--all", "--json", *url))
    assert everything["counts"] == {"reindex_queued": 2}
