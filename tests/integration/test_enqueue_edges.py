"""`ingest enqueue` at its edges: a file name that is not UTF-8, a call that fails or is
interrupted before its first file is stored, a file that grows after the size check."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations import enqueue
from ingestion_pipeline.operations.enqueue import EnqueueRefused, enqueue_paths


def count(conn, table: str) -> int:
    return conn.execute(f"select count(*) as n from {table}").fetchone()["n"]


@pytest.fixture
def latin1_folder(tmp_path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha document")
    # A name written by a Latin-1 system: the byte 0xE9 is not UTF-8.
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"cafe document")
    return folder


def test_a_file_name_that_is_not_utf8_is_stored_with_escapes(pool, settings, latin1_folder, conn):
    report = enqueue_paths(pool, [latin1_folder], max_bytes=settings.max_file_bytes)

    assert report.counts == {"new": 2}
    names = sorted(r["source_name"] for r in conn.execute("select source_name from documents"))
    assert names == ["a.txt", "caf\\xe9.txt"]
    assert all(f.path.encode("utf-8") for f in report.files)  # printable
    batch = conn.execute("select metadata from import_batches").fetchone()
    assert batch["metadata"]["files"] == 2 == count(conn, "documents") == count(conn, "ingestion_jobs")


def test_cli_lists_a_non_utf8_name(db_url, latin1_folder, capsys):
    assert ingest(["enqueue", str(latin1_folder), "--database-url", db_url]) == 0
    out = capsys.readouterr().out
    assert "caf\\xe9.txt" in out and "2 file(s)" in out


def test_a_file_that_vanishes_before_the_first_is_stored_leaves_no_batch(pool, settings, tmp_path, conn, monkeypatch):
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    checked = enqueue.collect_files

    def check_then_lose_the_first(paths, max_bytes, *chosen):
        files = checked(paths, max_bytes, *chosen)
        files[0].unlink()  # gone after the check
        return files

    monkeypatch.setattr(enqueue, "collect_files", check_then_lose_the_first)
    with pytest.raises(EnqueueRefused, match=r"a\.txt.*nothing was written"):
        enqueue_paths(pool, [tmp_path / "a.txt", tmp_path / "b.txt"], max_bytes=settings.max_file_bytes)

    assert (count(conn, "import_batches"), count(conn, "documents")) == (0, 0)


def test_ctrl_c_during_the_first_file_leaves_no_batch(pool, settings, tmp_path, conn, monkeypatch):
    (tmp_path / "a.txt").write_text("alpha")
    real_enqueue = IngestionRpc.enqueue_version

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(IngestionRpc, "enqueue_version", interrupted)
    with pytest.raises(KeyboardInterrupt):
        enqueue_paths(pool, [tmp_path / "a.txt"], max_bytes=settings.max_file_bytes)
    assert (count(conn, "import_batches"), count(conn, "documents"), count(conn, "ingestion_jobs")) == (0, 0, 0)

    monkeypatch.setattr(IngestionRpc, "enqueue_version", real_enqueue)
    report = enqueue_paths(pool, [tmp_path / "a.txt"], max_bytes=settings.max_file_bytes)
    assert report.counts == {"new": 1} and count(conn, "import_batches") == 1


def test_ctrl_c_after_the_first_file_keeps_the_batch_with_what_was_stored(pool, settings, tmp_path, conn, monkeypatch):
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    real_enqueue = IngestionRpc.enqueue_version

    def second_interrupted(self, *args, **kwargs):
        if kwargs["source_key"].endswith("/b.txt"):
            raise KeyboardInterrupt
        return real_enqueue(self, *args, **kwargs)

    monkeypatch.setattr(IngestionRpc, "enqueue_version", second_interrupted)
    with pytest.raises(KeyboardInterrupt):
        enqueue_paths(pool, [tmp_path / "a.txt", tmp_path / "b.txt"], max_bytes=settings.max_file_bytes)
    assert (count(conn, "import_batches"), count(conn, "documents"), count(conn, "ingestion_jobs")) == (1, 1, 1)


def test_a_file_that_grew_after_the_check_is_not_read_whole(pool, settings, tmp_path, conn, monkeypatch):
    small = tmp_path / "grows.txt"
    small.write_text("x" * 100)
    checked = enqueue.collect_files

    def check_then_grow(paths, max_bytes, *chosen):
        files = checked(paths, max_bytes, *chosen)
        with open(small, "r+b") as handle:
            handle.truncate(64 * 1024 * 1024)  # sparse: 64 MB appear at no cost
        return files

    monkeypatch.setattr(enqueue, "collect_files", check_then_grow)
    tracemalloc.start()
    try:
        with pytest.raises(EnqueueRefused) as refused:
            enqueue_paths(pool, [small], max_bytes=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"read {peak / 1024 / 1024:.0f} MB of a file limited to 1000 bytes"
    assert "grows.txt" in str(refused.value) and "nothing was written" in str(refused.value)
    assert count(conn, "import_batches") == 0
