"""The worker end to end on a real database: enqueue files, drain, search; bad inputs;
reindex readability; lease takeover mid-build; a killed connection retried."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db import connection
from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.processing import HashEmbedder, NoEmbedder
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Outcome, Worker
from tests.fixtures.pdf import make_pdf
from tests.helpers import Background, batch, document, job, make_lease_stale

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PHRASES = {
    "sample.txt": "quick brown fox of plaintext",
    "sample.md": "markdown walrus migration",
    "sample.html": "html heron habitat",
    "sample.pdf": "portable pelican document",
}


def settings_for(url: str, **overrides):
    return load_settings(database_url=url, retry_backoff_seconds=0, **overrides)


@pytest.fixture
def corpus(tmp_path) -> Path:
    folder = tmp_path / "corpus"
    (folder / "nested").mkdir(parents=True)
    for name in ("sample.txt", "sample.md", "sample.html"):
        shutil.copy(FIXTURES / name, folder / name)
    (folder / "nested" / "sample.pdf").write_bytes(
        make_pdf(["Pelican report", "A portable pelican document about coastal birds."], title="Pelican report")
    )
    return folder


def committed_rows(conn, document_id) -> dict[str, int]:
    counts = {}
    for table in ("document_pages", "document_sections", "document_chunks"):
        counts[table] = conn.execute(
            f"select count(*) as n from {table} t join documents d on d.id = t.document_id "
            "and d.index_generation_id = t.index_generation_id where d.id = %s",
            (document_id,),
        ).fetchone()["n"]
    return counts


def search(db_url, capsys, text) -> list[dict]:
    capsys.readouterr()
    assert ingest(["search", text, "--json", "--database-url", db_url]) == 0
    return json.loads(capsys.readouterr().out)


def test_folder_of_every_format_is_indexed_and_searchable(db_url, pool, settings, corpus, conn, capsys):
    report = enqueue_paths(pool, [corpus], max_bytes=settings.max_file_bytes, batch_name="formats")
    assert report.counts == {"new": 4}

    result = Worker(pool, settings, embedder=HashEmbedder()).run(drain=True)
    assert result.counts["completed"] == 4, [r.message for r in result.results]

    for entry in report.files:
        stored = document(conn, entry.document_id)
        assert stored["status"] == "indexed"
        rows = committed_rows(conn, entry.document_id)
        assert (stored["page_count"], stored["section_count"], stored["chunk_count"]) == (
            rows["document_pages"],
            rows["document_sections"],
            rows["document_chunks"],
        )
        assert rows["document_chunks"] > 0
    assert batch(conn, report.batch_id)["status"] == "completed"
    for name, phrase in PHRASES.items():
        hits = search(db_url, capsys, f'"{phrase}"')
        assert hits and hits[0]["source_name"] == name, (name, hits)


def test_stage_log_has_every_stage_with_durations(pool, settings, corpus, conn):
    enqueue_paths(pool, [corpus / "sample.md"], max_bytes=settings.max_file_bytes)
    [result] = Worker(pool, settings).run(drain=True).results
    stages = conn.execute(
        "select stage, detail from ingestion_job_stages where job_id = %s order by id", (result.job_id,)
    ).fetchall()
    assert [s["stage"] for s in stages] == ["load", "parse", "chunk", "embed", "write", "commit"]
    assert all(s["detail"]["seconds"] >= 0 for s in stages)


def test_bad_inputs_fail_clearly_and_affect_nothing_else(db_url, pool, corpus, conn):
    folder = corpus
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ngarbage without xref")
    (folder / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)  # a PNG signature, then junk
    (folder / "empty.txt").write_bytes(b"")
    (folder / "huge.txt").write_text("big words here. " * 20_000)  # ~320 kB
    # Uploaded under a generous limit; the worker's limit is lower (it was lowered since).
    report = enqueue_paths(pool, [folder], max_bytes=10_000_000)
    worker_settings = settings_for(db_url, max_file_bytes=100_000)
    Worker(pool, worker_settings).run(drain=True)

    by_name = {Path(f.path).name: document(conn, f.document_id) for f in report.files}
    expected_failures = {
        "corrupt.pdf": "pdf",
        "image.txt": "damaged png image",
        "empty.txt": "empty",
        "huge.txt": "limit",
    }
    for name, word in expected_failures.items():
        assert by_name[name]["status"] == "failed", name
        assert word in by_name[name]["error_message"].lower(), (name, by_name[name]["error_message"])
    for name in PHRASES:
        assert by_name[name]["status"] == "indexed", name
    final = batch(conn, report.batch_id)
    assert (final["status"], final["failed_files"], final["completed_files"]) == ("completed_with_errors", 4, 4)


class BlockingEmbedder:
    """Pauses a build inside its embed stage until released: lets a test act mid-build."""

    name = "blocking"
    dimensions = None

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts):
        self.entered.set()
        assert self.release.wait(30), "test never released the build"
        return None


def test_reindex_keeps_the_old_generation_readable_until_commit(pool, settings, corpus, conn):
    report = enqueue_paths(pool, [corpus / "sample.txt"], max_bytes=settings.max_file_bytes)
    Worker(pool, settings).run(drain=True)
    document_id = report.files[0].document_id
    old_generation = document(conn, document_id)["index_generation_id"]
    visible = "select distinct index_generation_id from committed_document_chunks where document_id = %s"

    reindex = enqueue_paths(pool, [corpus / "sample.txt"], max_bytes=settings.max_file_bytes, reindex=True)
    assert reindex.counts == {"reindex_queued": 1}
    embedder = BlockingEmbedder()
    run = Background(lambda: Worker(pool, settings, embedder=embedder).run(drain=True))
    assert embedder.entered.wait(30)
    assert [r["index_generation_id"] for r in conn.execute(visible, (document_id,))] == [old_generation]
    assert document(conn, document_id)["status"] == "indexed"
    embedder.release.set()
    assert run.join().counts["completed"] == 1

    new_generation = document(conn, document_id)["index_generation_id"]
    assert new_generation != old_generation
    assert [r["index_generation_id"] for r in conn.execute(visible, (document_id,))] == [new_generation]
    old = conn.execute("select status from index_generations where id = %s", (old_generation,)).fetchone()
    assert old["status"] == "superseded"


def test_worker_whose_lease_is_taken_over_stops_without_writing(pool, settings, corpus, conn):
    report = enqueue_paths(pool, [corpus / "sample.html"], max_bytes=settings.max_file_bytes)
    job_id, document_id = report.files[0].job_id, report.files[0].document_id
    embedder = BlockingEmbedder()
    worker_a = Worker(pool, settings, embedder=embedder)
    run_a = Background(lambda: worker_a.run(drain=True))
    assert embedder.entered.wait(30)

    make_lease_stale(conn, job_id)
    report_b = Worker(pool, settings, embedder=NoEmbedder()).run(drain=True)
    assert [r.outcome for r in report_b.results] == [Outcome.COMPLETED]
    writes_before = conn.execute(
        "select count(*) as n from ingestion_job_stages where worker_id = %s", (worker_a.worker_id,)
    ).fetchone()["n"]
    embedder.release.set()

    assert [r.outcome for r in run_a.join().results] == [Outcome.LEASE_LOST]
    by_a = conn.execute(
        "select count(*) as n from index_generations where worker_id = %s", (worker_a.worker_id,)
    ).fetchone()["n"]
    writes_after = conn.execute(
        "select count(*) as n from ingestion_job_stages where worker_id = %s", (worker_a.worker_id,)
    ).fetchone()["n"]
    assert by_a == 0 and writes_after == writes_before
    assert job(conn, job_id)["status"] == "completed"
    committed = conn.execute(
        "select count(*) as n from index_generations where document_id = %s and status = 'committed'", (document_id,)
    ).fetchone()["n"]
    assert committed == 1
    assert document(conn, document_id)["status"] == "indexed"


@pytest.mark.parametrize("build_cleaned_up", [False, True], ids=["fence", "cleaned-up"])
def test_rows_refused_by_the_database_stop_the_job_as_lease_lost(
    build_cleaned_up, pool, settings, corpus, conn, monkeypatch, caplog
):
    """A thread that stalls between beginning its generation and writing it, while the job
    is taken over and completed: its COPY is refused by the artifact fence (IF001), or by
    the foreign key when the janitor already removed the abandoned build (23503). Either
    way the job ends lease_lost: no retry, no failure recorded, no 'unexpected error'."""
    import ingestion_pipeline.worker.indexing as job_module

    report = enqueue_paths(pool, [corpus / "sample.txt"], max_bytes=settings.max_file_bytes)
    job_id, document_id = report.files[0].job_id, report.files[0].document_id
    stalled, resume = threading.Event(), threading.Event()
    real_write = job_module.write_encoded

    def stalling_write(*args, **kwargs):
        if not stalled.is_set():
            stalled.set()
            assert resume.wait(30)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(job_module, "write_encoded", stalling_write)
    run_a = Background(lambda: Worker(pool, settings).run(drain=True))
    assert stalled.wait(30)
    make_lease_stale(conn, job_id)
    assert [r.outcome for r in Worker(pool, settings).run(drain=True).results] == [Outcome.COMPLETED]
    if build_cleaned_up:
        assert IngestionRpc(conn).cleanup_generations(dry_run=False).generations == 1
    resume.set()

    [result] = run_a.join().results
    assert result.outcome == Outcome.LEASE_LOST and "artifact rows refused" in result.message
    assert ("ForeignKeyViolation" in result.message) == build_cleaned_up
    assert not [r for r in caplog.records if "unexpected error" in r.getMessage()]
    assert job(conn, job_id)["status"] == "completed"
    assert committed_rows(conn, document_id)["document_chunks"] == document(conn, document_id)["chunk_count"]


def test_killed_connection_mid_build_is_retried_and_completes(db_url, corpus, conn, monkeypatch):
    # The connection is killed while it is idle in the pool; the pool's check would replace
    # it (tests/integration/test_pool.py). Without the check it stands for a connection that
    # dies between the check and its use: the job must be retried.
    monkeypatch.setattr(connection, "_check_connection", None)
    settings = settings_for(db_url, pool_min_size=1, pool_max_size=1)
    victim_pool = make_pool(db_url, settings, application_name="ingest-test-victim")
    try:
        report = enqueue_paths(victim_pool, [corpus / "sample.md"], max_bytes=settings.max_file_bytes)
        embedder = BlockingEmbedder()
        run = Background(lambda: Worker(victim_pool, settings, embedder=embedder, concurrency=1).run(drain=True))
        assert embedder.entered.wait(30)
        killed = conn.execute(
            "select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity "
            "where application_name = 'ingest-test-victim'"
        ).fetchone()["n"]
        assert killed == 1
        embedder.release.set()
        embedder.entered.clear()
        # The retry runs the build again; let it through.
        outcomes = [r.outcome for r in run.join().results]
    finally:
        victim_pool.close()

    assert outcomes == [Outcome.RETRIED, Outcome.COMPLETED]
    stored = job(conn, report.files[0].job_id)
    assert (stored["status"], stored["attempt_count"]) == ("completed", 2)
    assert document(conn, report.files[0].document_id)["status"] == "indexed"
    assert IngestionRpc(conn).queue_health().stale_leases == 0
