"""Drift detection: the committed schema.sql and manifest are fresh, a migrated database
matches them on every server, and each kind of drift is reported."""

import subprocess
import sys
from pathlib import Path

import pytest

from ingestion_pipeline.db import drift
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect

ROOT = Path(__file__).resolve().parents[2]
INGEST = Path(sys.executable).parent / "ingest"


def drift_lines(url: str) -> list[str]:
    return drift.ledger_problems(url) + drift.differences(drift.load_manifest(), drift.catalog_manifest(url))


def run_ingest(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(INGEST), *arguments], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_committed_schema_and_manifest_are_fresh():
    result = run_ingest("db", "manifest", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_sql_is_a_normalised_dump():
    text = (ROOT / "migrations" / "schema.sql").read_text()
    assert "CREATE TABLE public.ingestion_jobs" in text
    assert "Dumped from database version" not in text and "\\restrict" not in text


def test_a_migrated_database_has_no_drift(db_url):
    assert drift_lines(db_url) == []


def test_foreign_key_drift_is_reported_both_ways(db_url):
    with connect(db_url) as conn:
        conn.execute("alter table document_chunks drop constraint document_chunks_index_generation_id_fkey")
        # R24e: the stage log must not reference jobs.
        conn.execute(
            "alter table ingestion_job_stages add constraint stages_job_fk "
            "foreign key (job_id) references ingestion_jobs (id)"
        )
    lines = drift_lines(db_url)
    assert "missing constraint document_chunks.document_chunks_index_generation_id_fkey" in lines
    assert (
        "unexpected constraint ingestion_job_stages.stages_job_fk (FOREIGN KEY (job_id) REFERENCES ingestion_jobs(id))"
    ) in lines


def test_changed_function_body_missing_index_and_grant_are_reported(db_url):
    with connect(db_url) as conn:
        conn.execute("""create or replace function heartbeat_ingestion_job(
                            p_job_id uuid, p_worker_id text, p_progress integer default null,
                            p_stage text default null, p_lease_token bigint default null)
                        returns jsonb language plpgsql security definer
                        set search_path = pg_catalog, public, pg_temp
                        as $$ begin return '{"ok": true}'; end $$""")
        conn.execute("drop index ingestion_jobs_claimable")
        conn.execute("grant execute on function retry_ingestion_job(uuid) to public")
    lines = drift_lines(db_url)
    assert any(
        line.startswith("changed function heartbeat_ingestion_job(uuid,text,integer,text,bigint): body_md5")
        for line in lines
    ), lines
    assert "missing index ingestion_jobs_claimable" in lines
    assert "unexpected function grant retry_ingestion_job(uuid) to PUBLIC" in lines


def test_a_pre_hardening_database_lacks_the_fenced_signatures(pre_hardening_db_url):
    lines = drift_lines(pre_hardening_db_url)
    assert "missing function heartbeat_ingestion_job(uuid,text,integer,text,bigint)" in lines
    assert "missing function complete_ingestion_job(uuid,uuid,uuid,text,text,bigint)" in lines
    assert any(line.startswith("unapplied migration") for line in lines)


def test_an_edited_applied_migration_is_reported(db_url):
    with connect(db_url) as conn:
        conn.execute(
            "update ingest_schema_migrations set checksum = repeat('0', 64) "
            "where version = (select min(version) from ingest_schema_migrations)"
        )
    [line] = drift.ledger_problems(db_url)
    assert "changed after it was applied" in line


def test_cli_check_drift_exit_codes(db_url, empty_db_url):
    clean = run_ingest("db", "check-drift", "--database-url", db_url)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    with connect(db_url) as conn:
        conn.execute("alter table documents drop constraint documents_batch_id_fkey")
        conn.execute(
            "create or replace function ingestion_queue_health(p_stale_after_seconds integer default 300) "
            "returns jsonb language sql security definer set search_path = pg_catalog, public, pg_temp "
            "as $$ select '{}'::jsonb $$"
        )
    drifted = run_ingest("db", "check-drift", "--database-url", db_url)
    assert drifted.returncode == 1
    assert "missing constraint documents.documents_batch_id_fkey" in drifted.stdout
    assert "changed function ingestion_queue_health(integer): body_md5" in drifted.stdout

    unreachable = run_ingest("db", "check-drift", "--database-url", "postgresql://postgres@127.0.0.1:1/x")
    assert unreachable.returncode == 2 and "Traceback" not in unreachable.stderr

    migrator.migrate(empty_db_url)
    assert run_ingest("db", "check-drift", "--database-url", empty_db_url).returncode == 0


@pytest.mark.parametrize(
    "statement, rule",
    [
        ("create index jobs_kind on ingestion_jobs (kind);", "require-concurrent-index-creation"),
        ("alter table documents add column owner text not null;", "adding-required-field"),
    ],
)
def test_squawk_catches_an_unsafe_migration(tmp_path, statement, rule):
    bad = tmp_path / "20991231000000_unsafe.sql"
    bad.write_text(statement + "\n")
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "squawk"),
            "--config",
            str(ROOT / ".squawk.toml"),
            "--reporter",
            "gcc",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert rule in result.stdout + result.stderr


def test_project_migrations_pass_squawk():
    files = sorted(str(p) for p in (ROOT / "migrations").glob("2*.sql"))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "squawk"), "--config", str(ROOT / ".squawk.toml"), *files],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
