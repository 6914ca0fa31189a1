"""Expand/contract rollouts: the database is migrated by the new release first, and the
workers of the previous release keep running until they are redeployed. Their schema
check must accept a database *ahead* of them (every file they know applied unchanged),
while `ingest db migrate` keeps refusing the unsafe ledgers."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from ingestion_pipeline import cli
from ingestion_pipeline.db import migrate
from ingestion_pipeline.db.connection import connect, make_pool
from ingestion_pipeline.db.ready import require_migrated
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError, MigrationError
from ingestion_pipeline.health import queue_checks
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.operations.sources import enqueue_content
from ingestion_pipeline.settings import load_settings
from tests.any_schema_rpc import OLD_SQL
from tests.conftest import LOCK_ORDER_NAME, UPGRADE_WINDOW_NAME, version_before
from tests.migration.migration_files import V1, V2, V3, effects, versions, write

REPO = Path(__file__).resolve().parents[2]
# The previous release (the end of round two: migrations through …_cancelled_batches_take_no_files),
# the support window's other end (docs/operations.md, "Upgrading"); and an older one, whose
# worker-id-fenced calls the database still honours.
PREVIOUS_RELEASE = "a4cc235"
RELEASE_BEFORE_LEASE_TOKENS = "1aceff5"
FIXTURES = REPO / "tests" / "fixtures"


def folder_with(tmp_path: Path, name: str, *written: tuple[str, str]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for version, table in written:
        write(folder, version, table)
    return folder


# --- the rules, on synthetic folders --------------------------------------------------------


def test_database_ahead_of_the_release_is_accepted_with_a_warning(empty_db_url, tmp_path, caplog):
    new = folder_with(tmp_path, "new", (V1, "create_a"), (V2, "create_b"), (V3, "create_c"))
    old = folder_with(tmp_path, "old", (V1, "create_a"), (V2, "create_b"))
    migrate.migrate(empty_db_url, new)

    with caplog.at_level(logging.WARNING):
        require_migrated(empty_db_url, old)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "ahead of this release" in warning and f"{V3}_create_c" in warning

    plan = migrate.plan(empty_db_url, old)
    assert plan.pending == [] and [m.version for m in plan.ahead] == [V3]
    again = migrate.migrate(empty_db_url, old)  # the old migrator: nothing to do
    assert again.newly_applied == [] and [m.version for m in again.ahead] == [V3]
    assert versions(empty_db_url) == [V1, V2, V3] and effects(empty_db_url) == [V1, V2, V3]


def test_unknown_applied_version_interleaved_with_known_ones_is_still_refused(empty_db_url, tmp_path):
    """A version the release does not know, older than its newest file, is a ledger from
    another line of history (or a deleted file), not a newer release."""
    full = folder_with(tmp_path, "full", (V1, "create_a"), (V2, "create_b"), (V3, "create_c"))
    migrate.migrate(empty_db_url, full)
    (full / f"{V2}_create_b.sql").unlink()

    with pytest.raises(MigrationError, match=f"{V2}_create_b.sql.*missing"):
        require_migrated(empty_db_url, full)
    with pytest.raises(MigrationError, match="missing"):
        migrate.migrate(empty_db_url, full)


def test_release_with_a_pending_file_is_refused_on_a_database_ahead_of_it(empty_db_url, tmp_path):
    newer = folder_with(tmp_path, "newer", (V1, "create_a"), (V3, "create_c"))
    older = folder_with(tmp_path, "older", (V1, "create_a"), (V2, "create_b"))
    migrate.migrate(empty_db_url, newer)

    with pytest.raises(IngestError, match=f"{V2}_create_b.sql"):
        require_migrated(empty_db_url, older)
    with pytest.raises(MigrationError, match=f"{V2}_create_b.sql.*newer migrations.*{V3}_create_c"):
        migrate.migrate(empty_db_url, older)
    assert versions(empty_db_url) == [V1, V3]


def test_changed_known_file_is_refused_even_when_the_database_is_ahead(empty_db_url, tmp_path):
    new = folder_with(tmp_path, "new", (V1, "create_a"), (V2, "create_b"))
    migrate.migrate(empty_db_url, new)
    old = folder_with(tmp_path, "old", (V1, "create_a"))
    (old / f"{V1}_create_a.sql").write_text("create table create_a (id bigint);\n")

    with pytest.raises(MigrationError, match="changed after it was applied"):
        require_migrated(empty_db_url, old)


# --- the project's own previous release ------------------------------------------------------


def previous_release_folder(tmp_path: Path) -> Path:
    """The package's migrations minus the files added after the previous release."""
    folder = tmp_path / "previous-migrations"
    folder.mkdir()
    last = version_before(LOCK_ORDER_NAME)
    for f in migrate.discover(migrate.default_migrations_dir()):
        if f.version <= last:
            shutil.copy(f.path, folder / f.path.name)
    return folder


def test_previous_release_folder_accepts_a_head_database_and_its_ingest_work_drains(
    db_url, tmp_path, monkeypatch, capsys, caplog
):
    folder = previous_release_folder(tmp_path)
    newer = [
        f for f in migrate.discover(migrate.default_migrations_dir()) if f.version > version_before(LOCK_ORDER_NAME)
    ]
    assert newer, "head has no migration after the previous release"
    monkeypatch.setattr(migrate, "default_migrations_dir", lambda: folder)
    monkeypatch.chdir(tmp_path)
    settings = load_settings(database_url=db_url)
    shutil.copy(FIXTURES / "sample.md", tmp_path / "sample.md")
    with make_pool(db_url, settings) as pool:
        report = enqueue_paths(pool, [tmp_path / "sample.md"], max_bytes=settings.max_file_bytes)

    with caplog.at_level(logging.WARNING):
        code = cli.main(["work", "--drain", "--json", "--database-url", db_url])

    out = capsys.readouterr()
    assert code == 0, out.err
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert all(f"{f.version}_{f.name}" in warnings for f in newer), warnings
    with connect(db_url) as conn:
        status = conn.execute("select status from ingestion_jobs where id = %s", (report.files[0].job_id,)).fetchone()
    assert status["status"] == "completed"


def _archive(commit: str, dest: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    probe = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"commit {commit} is not in this checkout's history")
    tar = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit, "ingestion_pipeline", "migrations"],
        capture_output=True,
        check=True,
    ).stdout
    # the "data" filter where this Python has it (3.11.4 and later); our own git archive
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(fileobj=BytesIO(tar)) as archive:
        archive.extractall(dest, **safe)  # noqa: S202
    return dest


OLD_WORKER = """
import json, sys
import ingestion_pipeline
assert ingestion_pipeline.__file__.startswith(sys.argv[2]), ingestion_pipeline.__file__
from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
settings = load_settings(database_url=sys.argv[1], retry_backoff_seconds=0)
with make_pool(sys.argv[1], settings) as pool:
    report = Worker(pool, settings).run(drain=True)
print(json.dumps({"counts": report.counts, "messages": [r.message for r in report.results]}))
"""


@pytest.mark.parametrize("release", [PREVIOUS_RELEASE, RELEASE_BEFORE_LEASE_TOKENS])
def test_worker_of_an_earlier_release_drains_a_head_database(release, db_url, tmp_path):
    """The real code of that release (`git archive`), with this venv's interpreter: the
    previous release's workers call the token-fenced bulk RPCs, the older one's the
    worker-id-fenced RPCs, which head still honours; its migrations folder passes today's
    check against the head database."""
    root = _archive(release, tmp_path / "release")
    require_migrated(db_url, root / "migrations")  # today's check, that release's files

    settings = load_settings(database_url=db_url)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("sample.md", "sample.txt", "sample.html"):
        shutil.copy(FIXTURES / name, corpus / name)
    with make_pool(db_url, settings) as pool:
        report = enqueue_paths(pool, [corpus], max_bytes=settings.max_file_bytes)

    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("DATABASE_URL", None)
    run = subprocess.run(
        [sys.executable, "-c", OLD_WORKER, db_url, str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["counts"]["completed"] == 3, result

    with connect(db_url) as conn:
        rows = conn.execute(
            "select j.status, j.lease_token, d.status as document_status from ingestion_jobs j "
            "join documents d on d.id = j.document_id where j.batch_id = %s",
            (report.batch_id,),
        ).fetchall()
        batch = conn.execute("select status from import_batches where id = %s", (report.batch_id,)).fetchone()
    assert [(r["status"], r["document_status"]) for r in rows] == [("completed", "indexed")] * 3
    assert batch["status"] == "completed"


OLD_CLI = """
import sys
import ingestion_pipeline
assert ingestion_pipeline.__file__.startswith(sys.argv[1]), ingestion_pipeline.__file__
from ingestion_pipeline.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def test_documents_indexed_by_the_previous_release_adopt_their_keys_without_a_reindex(
    pg_server, template_before, tmp_path
):
    """Index a folder with the previous release's `ingest` (its real code), migrate, enqueue
    the folder with this release: each file's keyless document takes the file's key as its
    version 1; nothing is queued, nothing indexed twice, one live document per file."""
    root = _archive(PREVIOUS_RELEASE, tmp_path / "release")
    dbname = f"ingest_t_adopt_{os.getpid()}_{tmp_path.name[-8:]}"
    url = pg_server.create_database(dbname, template=template_before(LOCK_ORDER_NAME))
    try:
        corpus = tmp_path / "corpus"
        corpus.mkdir()
        for name in ("sample.md", "sample.txt", "sample.html"):
            shutil.copy(FIXTURES / name, corpus / name)
        env = {**os.environ, "PYTHONPATH": str(root)}
        env.pop("DATABASE_URL", None)
        for command in (["enqueue", str(corpus)], ["work", "--drain"]):
            old = subprocess.run(
                [sys.executable, "-c", OLD_CLI, str(root), *command, "--database-url", url],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=120,
            )
            assert old.returncode == 0, old.stderr

        migrate.migrate(url)
        settings = load_settings(database_url=url)
        with make_pool(url, settings) as pool:
            report = enqueue_paths(pool, [corpus], max_bytes=settings.max_file_bytes)
            again = enqueue_paths(pool, [corpus], max_bytes=settings.max_file_bytes)
        assert report.counts == {"unchanged": 3} and again.counts == {"unchanged": 3}
        with connect(url) as conn:
            documents = conn.execute(
                "select source_key, version, indexed_version, status from documents where deleted_at is null"
            ).fetchall()
            jobs = conn.execute("select count(*) as n from ingestion_jobs").fetchone()["n"]
        assert sorted(d["source_key"] for d in documents) == sorted(f.source_key for f in report.files)
        assert {(d["version"], d["indexed_version"], d["status"]) for d in documents} == {(1, 1, "indexed")}
        assert jobs == 3  # the previous release's three, none since
    finally:
        pg_server.drop_database(dbname)


def test_health_finds_the_keyless_copies_the_previous_release_made_before_the_guard(
    pg_server, template_before, tmp_path
):
    """During the upgrade, before …_idle_janitor_passes_and_upgrade_window.sql: this release
    indexes a file by key, then the previous release's enqueue (its own SQL) of the same file
    makes a keyless copy. Once migrated, `ingest health`'s check `no_duplicate_documents`
    fails naming the copy, and passes once the copy is deleted."""
    dbname = f"ingest_t_dupes_{os.getpid()}_{tmp_path.name[-8:]}"
    url = pg_server.create_database(dbname, template=template_before(UPGRADE_WINDOW_NAME))
    try:
        content = b"# Tea\n\nGreen tea steeps for two minutes at eighty degrees.\n"
        sha256 = hashlib.sha256(content).hexdigest()
        with connect(url) as conn:
            keyed = enqueue_content(conn, content, source_key="file:///srv/tea.md", source_name="tea.md")
            copy = conn.execute(
                OLD_SQL["insert_document"],
                {
                    "batch_id": None,
                    "source_name": "tea.md",
                    "content_sha256": sha256,
                    "byte_size": len(content),
                    "mime_type": "text/markdown",
                },
            ).fetchone()
            assert copy is not None  # the defect this migration closes
            conn.execute(OLD_SQL["insert_document_source"], {"document_id": copy["id"], "content": content})

        migrate.migrate(url)
        with connect(url) as conn:
            health = IngestionRpc(conn).queue_health()
            assert (health.keyless_duplicates, health.keyless_duplicate_ids) == (1, [copy["id"]])
            [check] = [c for c in queue_checks(health, 3600) if c.name == "no_duplicate_documents"]
            assert not check.passed and str(copy["id"]) in check.message, check
            assert IngestionRpc(conn).delete_document(copy["id"]).ok
            health = IngestionRpc(conn).queue_health()
            assert health.keyless_duplicates == 0 and keyed.document_id not in health.keyless_duplicate_ids
    finally:
        pg_server.drop_database(dbname)
