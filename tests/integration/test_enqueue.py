"""Enqueue: atomic uploads, documents keyed by their path, reindex, refusals that write nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import EnqueueRefused, enqueue_paths
from ingestion_pipeline.worker import Worker
from ingestion_pipeline.worker.errors import LeaseLost
from ingestion_pipeline.worker.leases import LeaseKeeper
from tests.helpers import make_lease_stale, seed_job
from tests.search_server_off import SEARCH_SERVER_OFF

INGEST = Path(sys.executable).parent / "ingest"


@pytest.fixture
def folder(tmp_path) -> Path:
    (tmp_path / "docs" / "deeper").mkdir(parents=True)
    (tmp_path / "docs" / "a.txt").write_text("alpha document")
    (tmp_path / "docs" / "deeper" / "b.md").write_text("# Beta\n\nbeta document")
    (tmp_path / "docs" / ".hidden.txt").write_text("skipped")
    return tmp_path / "docs"


def count(conn, table: str) -> int:
    return conn.execute(f"select count(*) as n from {table}").fetchone()["n"]


def test_a_folder_becomes_one_batch_with_bytes_documents_and_jobs(pool, settings, folder, conn):
    report = enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes, batch_name="docs")
    assert sorted(Path(f.path).name for f in report.files) == ["a.txt", "b.md"]
    assert report.counts == {"new": 2}
    assert {f.source_key for f in report.files} == {
        (folder / "a.txt").resolve().as_uri(),
        (folder / "deeper" / "b.md").resolve().as_uri(),
    }
    assert (
        count(conn, "import_batches"),
        count(conn, "documents"),
        count(conn, "document_sources"),
        count(conn, "ingestion_jobs"),
    ) == (1, 2, 2, 2)
    stored = conn.execute(
        "select content from document_sources s join documents d on d.id = s.document_id where d.source_name = 'a.txt'"
    ).fetchone()
    assert bytes(stored["content"]) == b"alpha document"
    assert IngestionRpc(conn).refresh_batch(report.batch_id).total == 2


def test_symlinked_folders_are_followed_like_symlinked_files_and_loops_end(pool, settings, folder, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "c.txt").write_text("gamma document")
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    (folder / "deeper" / "loop").symlink_to(folder, target_is_directory=True)  # back up the tree
    report = enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes)
    assert sorted(Path(f.path).name for f in report.files) == ["a.txt", "b.md", "c.txt"]


def test_identical_bytes_at_two_paths_are_two_documents_and_one_path_again_is_unchanged(
    pool, settings, folder, tmp_path, conn
):
    first = enqueue_paths(pool, [folder / "a.txt"], max_bytes=settings.max_file_bytes)
    copy = tmp_path / "copy-of-a.txt"
    copy.write_bytes((folder / "a.txt").read_bytes())
    second = enqueue_paths(pool, [copy], max_bytes=settings.max_file_bytes)
    assert second.files[0].outcome == "new" and second.files[0].document_id != first.files[0].document_id
    Worker(pool, settings).run(drain=True)
    again = enqueue_paths(pool, [folder / "a.txt", copy], max_bytes=settings.max_file_bytes)
    assert [f.outcome for f in again.files] == ["unchanged", "unchanged"]
    assert [f.document_id for f in again.files] == [first.files[0].document_id, second.files[0].document_id]
    assert count(conn, "documents") == 2 and count(conn, "ingestion_jobs") == 2
    assert first.batch_status == "processing" and (again.batch_id, again.batch_status) == (None, None)


def test_an_enqueue_that_queues_nothing_writes_no_batch(pool, settings, folder, conn, capsys, db_url):
    first = enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes)
    again = enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes)
    assert again.counts == {"already_queued": 2} and (again.batch_id, again.batch_status) == (None, None)
    assert [r["id"] for r in conn.execute("select id from import_batches")] == [first.batch_id]

    Worker(pool, settings).run(drain=True)
    assert ingest(["enqueue", str(folder), "--database-url", db_url, "--batch", "again"]) == 0
    out = capsys.readouterr().out
    assert "nothing new to index: 2 file(s) unchanged (already indexed); no batch was written" in out
    assert ingest(["enqueue", str(folder), "--database-url", db_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["batch_id"] is None
    assert count(conn, "import_batches") == 1


def test_the_batch_is_written_with_the_first_file_that_gets_a_job(pool, settings, folder, conn):
    enqueue_paths(pool, [folder / "a.txt"], max_bytes=settings.max_file_bytes)
    Worker(pool, settings).run(drain=True)
    (folder / "deeper" / "b.md").write_text("# Beta\n\nbeta document, edited")
    # a.txt comes first (unchanged, written with no batch), then b.md is new: one batch, one job.
    report = enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes, batch_name="second")
    assert [f.outcome for f in report.files] == ["unchanged", "new"] and report.batch_status == "processing"
    batches = conn.execute("select id, name, total_files from import_batches order by created_at").fetchall()
    assert [(b["name"], b["total_files"]) for b in batches][1:] == [("second", 1)]
    job = conn.execute("select batch_id from ingestion_jobs where id = %s", (report.files[1].job_id,)).fetchone()
    assert job["batch_id"] == report.batch_id == batches[1]["id"]
    assert count(conn, "ingestion_jobs") == 2 and count(conn, "documents") == 2


def test_reindex_queues_once_and_reports_already_queued(pool, settings, folder, conn):
    enqueue_paths(pool, [folder / "a.txt"], max_bytes=settings.max_file_bytes)
    Worker(pool, settings).run(drain=True)
    again = enqueue_paths(pool, [folder / "a.txt"], max_bytes=settings.max_file_bytes, reindex=True)
    twice = enqueue_paths(pool, [folder / "a.txt"], max_bytes=settings.max_file_bytes, reindex=True)
    assert again.counts == {"reindex_queued": 1}
    assert twice.counts == {"already_queued": 1}
    assert twice.files[0].job_id == again.files[0].job_id
    kinds = [r["kind"] for r in conn.execute("select kind from ingestion_jobs order by created_at")]
    assert kinds == ["index", "reindex"]


@pytest.mark.parametrize("problem", ["missing", "oversize"])
def test_a_bad_path_refuses_everything_and_writes_nothing(pool, folder, conn, problem):
    paths = [folder]
    if problem == "missing":
        paths.append(folder / "does-not-exist.pdf")
        expected = "no such file"
    else:
        (folder / "big.txt").write_bytes(b"x" * 2048)
        expected = "over the"
    with pytest.raises(EnqueueRefused, match=expected):
        enqueue_paths(pool, paths, max_bytes=1024)
    assert (count(conn, "import_batches"), count(conn, "documents"), count(conn, "ingestion_jobs")) == (0, 0, 0)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read every file; checked as a normal user")
def test_an_unreadable_file_is_refused_when_named_and_passed_over_in_a_folder(pool, folder, conn):
    """Named, it refuses the call; found in a folder, it is reported and the folder's other
    files go in (issue 44: one broken entry does not block a folder)."""
    (folder / "a.txt").chmod(0)
    with pytest.raises(EnqueueRefused, match="not readable"):
        enqueue_paths(pool, [folder / "a.txt"], max_bytes=1_000_000)
    assert count(conn, "documents") == 0
    report = enqueue_paths(pool, [folder], max_bytes=1_000_000)
    assert [why for path, why in report.skipped if path.endswith("a.txt")] == ["not readable (permission denied)"]
    assert count(conn, "documents") == len(report.files) >= 1


def test_cli_enqueue_json_reports_the_batch(db_url, folder, capsys):
    assert ingest(["enqueue", str(folder), "--batch", "cli", "--json", "--database-url", db_url]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["batch_name"] == "cli" and report["counts"] == {"new": 2}
    assert {f["version"] for f in report["files"]} == {1} and all(
        f["source_key"].startswith("file:///") for f in report["files"]
    )
    assert ingest(["status", "--batch", report["batch_id"], "--json", "--database-url", db_url]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["batches"][0]["pending"] == 2


def test_cli_refuses_an_unmigrated_database(empty_db_url, folder, capsys):
    assert ingest(["enqueue", str(folder), "--database-url", empty_db_url]) == 1
    assert "pending migration" in capsys.readouterr().err


def test_heartbeat_that_finds_the_lease_lost_stops_the_job(conn):
    rpc = IngestionRpc(conn)
    _, job_id = seed_job(conn)
    [claimed] = rpc.claim("worker-a")
    keeper = LeaseKeeper(rpc, "worker-a", interval=3600)
    lease = keeper.hold(claimed)
    keeper.beat()
    lease.check()  # still ours
    make_lease_stale(conn, job_id)
    rpc.claim("worker-b")
    keeper.beat()
    assert lease.lost.is_set()
    with pytest.raises(LeaseLost):
        lease.check()


def test_ctrl_c_stops_a_polling_worker_cleanly(db_url, conn, tmp_path):
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("INGEST_") and k != "DATABASE_URL"
    } | SEARCH_SERVER_OFF
    proc = subprocess.Popen(
        [str(INGEST), "work", "--json", "--database-url", db_url],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while (
            conn.execute(
                "select count(*) as n from pg_stat_activity where application_name = 'ingest' "
                "and datname = current_database()"
            ).fetchone()["n"]
            == 0
        ):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "worker never connected"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert json.loads(out)["claimed"] == 0
