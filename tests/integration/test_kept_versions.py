"""Older versions' bytes (issue 31): only the latest version's are kept unless
INGEST_KEEP_VERSIONS says more; the janitor removes kept bytes beyond it, and those of
deleted documents, in bounded passes; `ingest show --bytes` gives a kept version back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.worker import janitor


def text_of(version: int) -> str:
    return f"# Notes\n\nThe notes as written in version {version}.\n"


def enqueue_versions(pool, path: Path, versions: range, keep_versions: int) -> None:
    for version in versions:
        path.write_text(text_of(version))
        report = enqueue_paths(pool, [path], max_bytes=10_000, keep_versions=keep_versions)
        assert [(f.outcome, f.version) for f in report.files] == [("new" if version == 1 else "new_version", version)]


def kept_rows(conn) -> list[tuple[str, int]]:
    rows = conn.execute(
        "select d.source_name, k.version from document_version_sources k join documents d on d.id = k.document_id "
        "order by 1, 2"
    ).fetchall()
    return [(row["source_name"], row["version"]) for row in rows]


def document_of(conn, name: str):
    return conn.execute("select id from documents where source_name = %s", (name,)).fetchone()["id"]


def test_only_the_latest_bytes_are_kept_by_default(pool, conn, tmp_path):
    enqueue_versions(pool, tmp_path / "notes.md", range(1, 4), keep_versions=1)
    rpc = IngestionRpc(pool)
    document_id = document_of(conn, "notes.md")
    assert kept_rows(conn) == []
    assert rpc.kept_versions(document_id) == [3]
    assert rpc.version_bytes(document_id, 3) == text_of(3).encode()
    assert rpc.version_bytes(document_id, 2) is None


def test_keep_versions_keeps_the_replaced_bytes_and_the_janitor_trims_to_it(pool, conn, tmp_path):
    enqueue_versions(pool, tmp_path / "notes.md", range(1, 6), keep_versions=3)
    rpc = IngestionRpc(pool)
    document_id = document_of(conn, "notes.md")
    # each new version kept its predecessor's bytes: 1..4 kept, 5 is the latest
    assert kept_rows(conn) == [("notes.md", v) for v in (1, 2, 3, 4)]
    assert rpc.version_bytes(document_id, 2) == text_of(2).encode()

    owed = rpc.cleanup_kept_bytes(keep_versions=3, limit=100, dry_run=True)
    assert (owed.versions, owed.dry_run) == (2, True) and owed.bytes > 0
    assert kept_rows(conn) == [("notes.md", v) for v in (1, 2, 3, 4)]  # a dry run removes nothing

    done = janitor.cleanup_kept_bytes(rpc, keep_versions=3, batch_size=100, time_budget_seconds=30)
    assert (done["versions"], done["bytes"]) == (2, owed.bytes)
    # the newest three versions' bytes stay: 5 (latest) and 4, 3 (kept)
    assert rpc.kept_versions(document_id) == [3, 4, 5]
    assert rpc.version_bytes(document_id, 1) is None
    history = rpc.document_history(document_id=document_id)
    assert [v.version for v in history.versions] == [5, 4, 3, 2, 1]  # every version's metadata stays


def test_cleanup_goes_in_bounded_passes_and_the_dry_run_counts_what_a_pass_removes(pool, conn, tmp_path):
    for name in ("a", "b", "c", "d", "e"):
        enqueue_versions(pool, tmp_path / f"{name}.md", range(1, 4), keep_versions=10)
    rpc = IngestionRpc(pool)
    assert len(kept_rows(conn)) == 10  # versions 1 and 2 of each

    planned = rpc.cleanup_kept_bytes(keep_versions=1, limit=3, dry_run=True)
    first = rpc.cleanup_kept_bytes(keep_versions=1, limit=3, dry_run=False)
    assert planned.versions == first.versions == 3 and planned.bytes == first.bytes
    assert len(kept_rows(conn)) == 7

    rest = janitor.cleanup_kept_bytes(rpc, keep_versions=1, batch_size=3, time_budget_seconds=30)
    assert rest["passes"] == 3 and rest["versions"] == 7  # 3 + 3 + 1, then nothing owed
    assert kept_rows(conn) == []


def test_kept_bytes_of_a_deleted_document_go_with_the_janitor(pool, conn, tmp_path):
    enqueue_versions(pool, tmp_path / "gone.md", range(1, 4), keep_versions=5)
    enqueue_versions(pool, tmp_path / "stays.md", range(1, 3), keep_versions=5)
    rpc = IngestionRpc(pool)
    assert rpc.delete_document(document_of(conn, "gone.md")).ok

    done = janitor.run_janitor(rpc, batch_size=100, time_budget_seconds=30, keep_versions=5)
    assert done["kept_bytes"]["versions"] == 2
    assert kept_rows(conn) == [("stays.md", 1)]


def test_a_bad_keep_count_is_refused(pool):
    with pytest.raises(Exception, match="p_keep_versions must be at least 1"):
        IngestionRpc(pool).cleanup_kept_bytes(keep_versions=0)


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = ingest(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_ingest_show_bytes_gives_a_kept_version_back(db_url, tmp_path, capsys, monkeypatch):
    url = ["--database-url", db_url]
    notes = tmp_path / "notes.md"
    monkeypatch.setenv("INGEST_KEEP_VERSIONS", "2")
    for version in (1, 2, 3):
        notes.write_text(text_of(version))
        assert run(capsys, "enqueue", str(notes), *url)[0] == 0

    code, out, _ = run(capsys, "show", str(notes), "--json", *url)
    assert code == 0
    assert [(v["version"], v["bytes_kept"]) for v in json.loads(out)["versions"]] == [
        (3, True),
        (2, True),
        (1, True),  # kept until the janitor trims to 2
    ]
    assert run(capsys, "janitor", *url)[0] == 0
    code, out, _ = run(capsys, "show", str(notes), "--json", *url)
    assert [(v["version"], v["bytes_kept"]) for v in json.loads(out)["versions"]] == [
        (3, True),
        (2, True),
        (1, False),
    ]

    assert run(capsys, "show", str(notes), "--bytes", *url)[1] == text_of(3)
    assert run(capsys, "show", str(notes), "--version", "2", "--bytes", *url)[1] == text_of(2)
    code, out, err = run(capsys, "show", str(notes), "--version", "1", "--bytes", *url)
    assert code == 1 and out == ""
    assert "the bytes of version 1 of file://" in err and "are not kept (kept: 2, 3)" in err
