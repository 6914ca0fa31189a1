"""A folder's documents, not its stylesheets, scripts and pictures' source (issue 61, item 2):
`ingest enqueue FOLDER`, `ingest sync`, `Index.enqueue` and `Index.sync` take the files whose
suffix is a format's (processing/suffixes.py), count the others by kind in the report
(`skipped: 3 SVG images, 1 stylesheet`), and `--include`/`--exclude` globs choose otherwise;
a file named by itself is still tried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion_pipeline.api import Index
from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.operations.source_sync import sync_registered

CSS = "body { font-family: serif; color: #222; margin: 0 auto; }\n"
SKIPPED = "skipped: 3 SVG images, 1 file without a suffix, 1 script, 1 stylesheet"
HOW = " (--include/--exclude GLOB choose the files taken)"


def run(capsys, db_url: str, *args: str, expect: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == expect, out + err
    return out, err


@pytest.fixture
def html_docs(tmp_path) -> Path:
    """A folder of HTML documentation as packages ship it: pages beside their stylesheet,
    script, pictures' source and a file without a suffix."""
    root = tmp_path / "html"
    (root / "images").mkdir(parents=True)
    (root / "drafts").mkdir()
    (root / "index.html").write_text("<html><body><h1>Vacuum</h1><p>Vacuum reclaims storage.</p></body></html>")
    (root / "drafts" / "wal.html").write_text("<html><body><h1>WAL</h1><p>Write-ahead logging.</p></body></html>")
    (root / "stylesheet.css").write_text(CSS)
    (root / "docs.js").write_text("document.title = 'font-family color margin';\n")
    for n in range(3):
        (root / "images" / f"figure-{n}.svg").write_text(
            f'<svg xmlns="http://www.w3.org/2000/svg"><text>{n}</text></svg>'
        )
    (root / "README").write_text("font-family color margin\n")
    return root


def names(report: dict) -> list[str]:
    return sorted(Path(f["path"]).name for f in report["files"])


def test_enqueue_takes_a_folders_documents_and_counts_the_rest(html_docs, db_url, capsys):
    out, err = run(capsys, db_url, "enqueue", str(html_docs))
    assert err == "ingest: created collection 'default'\n"  # and not one line per file passed over
    assert "index.html" in out and "wal.html" in out and "stylesheet.css" not in out
    assert f"\n{SKIPPED}{HOW}\n" in out
    run(capsys, db_url, "work", "--drain")
    out, _ = run(capsys, db_url, "search", "font-family color margin")
    assert out == "no results\n"  # the stylesheet is not in the index
    out, _ = run(capsys, db_url, "search", "vacuum reclaims", "--json")
    assert [Path(hit["source_uri"]).name for hit in json.loads(out)] == ["index.html"]


def test_globs_choose_otherwise_and_a_file_named_is_tried(html_docs, db_url, capsys):
    out, _ = run(capsys, db_url, "enqueue", str(html_docs), "--include", "*.CSS", "--include", "images/*", "--json")
    report = json.loads(out)
    assert names(report) == ["figure-0.svg", "figure-1.svg", "figure-2.svg", "stylesheet.css"]
    assert report["skipped_by_kind"] == {"file not included": 4}
    out, _ = run(capsys, db_url, "enqueue", str(html_docs), "--exclude", "drafts/*", "--json")
    report = json.loads(out)
    assert names(report) == ["index.html"]
    assert report["skipped_by_kind"] == {
        "SVG image": 3,
        "excluded file": 1,
        "file without a suffix": 1,
        "script": 1,
        "stylesheet": 1,
    }
    # a file named by itself is not chosen among others: it is tried, whatever its suffix
    out, _ = run(capsys, db_url, "enqueue", str(html_docs / "docs.js"), "--exclude", "*.js", "--json")
    assert [(f["outcome"], Path(f["path"]).name) for f in json.loads(out)["files"]] == [("new", "docs.js")]
    # a folder with no document is refused, saying what it held
    _, err = run(capsys, db_url, "enqueue", str(html_docs / "images"), expect=1)
    assert err.splitlines() == [
        "ingest: error: nothing was enqueued: no documents in the given paths (skipped: 3 SVG images)"
    ]


def test_sync_takes_the_documents_and_a_file_no_longer_taken_leaves(html_docs, db_url, capsys):
    everything = ["sync", str(html_docs), "--collection", "pg", "--include", "*", "--json"]
    out, _ = run(capsys, db_url, *everything)
    assert json.loads(out)["counts"]["new"] == 8
    out, _ = run(capsys, db_url, "sync", str(html_docs), "--collection", "pg")
    assert f"\n{SKIPPED}{HOW}\n" in out
    out, _ = run(capsys, db_url, "sync", str(html_docs), "--collection", "pg", "--exclude", "drafts/*", "--json")
    report = json.loads(out)
    assert report["counts"]["unchanged"] == 1 and report["counts"]["deleted"] == 1  # drafts/wal.html
    assert report["skipped_by_kind"]["excluded file"] == 1
    out, _ = run(capsys, db_url, "show", str(html_docs / "stylesheet.css"), "--collection", "pg", expect=1)
    assert "deleted" in out


def test_the_python_api_chooses_the_same_way(html_docs, db_url):
    with Index.open(db_url) as index:
        enqueued = index.enqueue(html_docs, exclude=["index.html"])
        assert [Path(f.path).name for f in enqueued.files] == ["wal.html"]
        assert (
            str(enqueued.passed_over)
            == "3 SVG images, 1 excluded file, 1 file without a suffix, 1 script, 1 stylesheet"
        )
        synced = index.sync(html_docs, collection="styles", include="*.css")
        assert (synced.counts["new"], synced.passed_over.total) == (1, 7)
        ran = index.run(html_docs / "images", include=["figure-1.*"], collection="styles")
        assert [Path(f.path).name for f in ran.enqueued.files] == ["figure-1.svg"]


def test_a_registered_source_keeps_its_globs_for_every_sync(html_docs, db_url, capsys, pool, settings):
    """`ingest source add --include/--exclude` stores the globs; each sync of the source, by
    `ingest source sync` or Dagster's asset (sync_registered), takes the files they choose."""
    out, _ = run(
        capsys,
        db_url,
        "source",
        "add",
        "site",
        str(html_docs),
        "--collection",
        "site",
        "--include",
        "*.css",
        "--include",
        "*.html",
        "--exclude",
        "drafts/*",
    )
    assert out.rstrip().endswith("on demand, include *.css *.html, exclude drafts/*")
    out, _ = run(capsys, db_url, "source", "list", "--json")
    [listed] = json.loads(out)
    assert (listed["include_globs"], listed["exclude_globs"]) == (["*.css", "*.html"], ["drafts/*"])
    out, _ = run(capsys, db_url, "source", "list")
    assert "include *.css *.html, exclude drafts/*" in out
    out, _ = run(capsys, db_url, "source", "sync", "site", "--dry-run", "--json")
    assert sorted(Path(key).name for key, _ in map(dict.values, json.loads(out)["changes"])) == [
        "index.html",
        "stylesheet.css",
    ]
    report = sync_registered(pool, "site", max_bytes=settings.max_file_bytes)
    assert sorted(Path(key).name for key, _ in report.changes) == ["index.html", "stylesheet.css"]
    assert report.passed_over.by_kind() == {"file not included": 5, "excluded file": 1}
    out, _ = run(capsys, db_url, "source", "list")
    assert "new 2, skipped 6" in out  # its last sync's counts
    # a source registered without globs syncs its documents
    run(capsys, db_url, "source", "add", "plain", str(html_docs), "--collection", "plain")
    report = sync_registered(pool, "plain", max_bytes=settings.max_file_bytes)
    assert sorted(Path(key).name for key, _ in report.changes) == ["index.html", "wal.html"]
