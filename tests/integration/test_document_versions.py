"""Documents that follow their source, through the `ingest` command (issue 31): a changed
file is a new version of the same document and only its text stays searchable; two files of
one name in two folders are two documents, told apart by their key; `ingest show` lists a
document's versions; a version that fails leaves the previous one indexed and says why."""

from __future__ import annotations

import json
from pathlib import Path

from ingestion_pipeline.cli import main as ingest

PRICING = "# Pricing\n\nThe premium plan costs {} dollars per month.\n"


def run(capsys, *args: str) -> str:
    capsys.readouterr()
    code = ingest(list(args))
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def test_the_latest_version_of_a_file_is_the_one_searched(db_url, tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    url = ["--database-url", db_url]
    (docs / "pricing.md").write_text(PRICING.format(10))
    first = json.loads(run(capsys, "enqueue", str(docs), "--batch", "v1", "--json", *url))
    run(capsys, "work", "--drain", *url)
    (docs / "pricing.md").write_text(PRICING.format(25))
    second = json.loads(run(capsys, "enqueue", str(docs), "--batch", "v2", "--json", *url))
    run(capsys, "work", "--drain", *url)

    assert [(f["outcome"], f["version"]) for f in first["files"]] == [("new", 1)]
    assert [(f["outcome"], f["version"]) for f in second["files"]] == [("new_version", 2)]
    hits = json.loads(run(capsys, "search", "premium plan dollars", "--json", *url))
    assert len(hits) == 1 and "25" in hits[0]["snippet"] and "10" not in hits[0]["snippet"]
    assert hits[0]["source_uri"] == (docs / "pricing.md").resolve().as_uri()

    shown = run(capsys, "show", str(docs / "pricing.md"), *url)
    assert "indexed at version 2" in shown
    history = json.loads(run(capsys, "show", str(docs / "pricing.md"), "--json", *url))
    assert [(v["version"], v["outcome"]) for v in history["versions"]] == [(2, "indexed"), (1, "replaced")]
    again = json.loads(run(capsys, "enqueue", str(docs), "--json", *url))
    assert again["counts"] == {"unchanged": 1} and (again["batch_id"], again["batch_status"]) == (None, None)


def test_files_of_one_name_in_two_folders_are_two_documents(db_url, tmp_path, capsys):
    url = ["--database-url", db_url]
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "README.md").write_text(f"# Readme\n\nThe otter lives in folder {folder}.\n")
    run(capsys, "enqueue", str(tmp_path / "a"), str(tmp_path / "b"), *url)
    run(capsys, "work", "--drain", *url)
    hits = json.loads(run(capsys, "search", "otter folder", "--json", *url))
    assert sorted(h["source_uri"] for h in hits) == [
        (tmp_path / "a" / "README.md").resolve().as_uri(),
        (tmp_path / "b" / "README.md").resolve().as_uri(),
    ]
    assert {h["source_name"] for h in hits} == {"README.md"}


def test_a_version_that_fails_leaves_the_previous_one_indexed_and_says_why(db_url, tmp_path, capsys):
    url = ["--database-url", db_url]
    page = tmp_path / "page.html"
    page.write_text("<html><body><h1>Otters</h1><p>Otters hold hands while they sleep.</p></body></html>")
    run(capsys, "enqueue", str(page), *url)
    run(capsys, "work", "--drain", *url)
    page.write_bytes(b"\x00\x01\x02 not a page at all \xff\xfe" * 50)  # binary: the parser refuses it
    run(capsys, "enqueue", str(page), *url)
    run(capsys, "work", "--drain", *url)

    history = json.loads(run(capsys, "show", str(page), "--json", *url))
    assert history["document"]["indexed_version"] == 1 and history["document"]["version"] == 2
    [latest, previous] = history["versions"]
    assert (latest["outcome"], previous["outcome"]) == ("failed", "indexed") and latest["error_message"]
    assert "indexed at version 1" in run(capsys, "show", str(page), *url)
    hits = json.loads(run(capsys, "search", "otters sleep", "--json", *url))
    assert [h["source_uri"] for h in hits] == [Path(page).resolve().as_uri()]
    status = json.loads(run(capsys, "status", "--json", *url))
    [failure] = status["failures"]
    assert (failure["source_key"], failure["version"]) == (page.resolve().as_uri(), 2)
    assert (failure["indexed_version"], failure["latest_version"]) == (1, 2)
    [row] = [line for line in run(capsys, "status", *url).splitlines() if line.startswith(page.resolve().as_uri())]
    assert row.split()[1:4] == ["2", "version", "1"]  # version 2 failed; version 1 is still searchable
    assert "binary" in row
