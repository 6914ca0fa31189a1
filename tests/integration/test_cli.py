"""The real `ingest` console script, run as a user would: one line per error, no tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion_pipeline.db import migrate
from ingestion_pipeline.db.connection import redact
from tests.search_server_off import SEARCH_SERVER_OFF

INGEST = Path(sys.executable).parent / "ingest"
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nope"
UNREACHABLE_WITH_PASSWORD = "postgresql://postgres:s3cret@127.0.0.1:1/nope"


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")
    } | SEARCH_SERVER_OFF
    clean.update(env)
    return subprocess.run([str(INGEST), *args], cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=120)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ingest: error:"), lines[0]
    return lines[0]


def test_console_script_is_installed():
    assert INGEST.exists()


def test_bad_database_url_is_one_line_without_traceback(tmp_path):
    line = one_error_line(run(tmp_path, "db", "status", DATABASE_URL="not a url ==="))
    assert "DATABASE_URL" in line


def test_bad_database_url_from_environment_hides_its_value(tmp_path):
    url = "postgresql://app:s3cret@db.example:5432/app?bogus=1"
    result = run(tmp_path, "db", "migrate", DATABASE_URL=url)
    line = one_error_line(result)
    assert "s3cret" not in result.stderr + result.stdout
    assert "DATABASE_URL" in line and "INGEST_DATABASE_URL" not in line


@pytest.mark.parametrize("command", [["db", "status"], ["db", "migrate"], ["db", "migrate", "--dry-run"]])
def test_unreachable_database_is_one_line(tmp_path, command):
    line = one_error_line(run(tmp_path, *command, "--database-url", UNREACHABLE))
    assert "127.0.0.1" in line


def test_non_integer_pool_size_names_the_variable(tmp_path):
    line = one_error_line(run(tmp_path, "db", "status", "--database-url", UNREACHABLE, INGEST_POOL_MAX_SIZE="abc"))
    assert "INGEST_POOL_MAX_SIZE" in line


def test_heartbeat_too_slow_for_stale_window_is_refused(tmp_path):
    line = one_error_line(
        run(
            tmp_path,
            "db",
            "status",
            "--database-url",
            UNREACHABLE,
            INGEST_HEARTBEAT_INTERVAL_SECONDS="200",
            INGEST_STALE_AFTER_SECONDS="300",
        )
    )
    assert "INGEST_HEARTBEAT_INTERVAL_SECONDS" in line


@pytest.mark.parametrize("command", [["db", "status"], ["db", "migrate"], ["db", "migrate", "--dry-run"]])
def test_password_never_appears_in_output(tmp_path, command):
    flag = run(tmp_path, *command, "--database-url", UNREACHABLE_WITH_PASSWORD)
    env = run(tmp_path, *command, DATABASE_URL=UNREACHABLE_WITH_PASSWORD)
    for result in (flag, env):
        one_error_line(result)
        assert "s3cret" not in result.stderr + result.stdout


def test_migrate_then_status_shows_every_migration_applied(tmp_path, empty_db_url):
    files = migrate.discover(migrate.default_migrations_dir())
    home = tmp_path / "home"  # the user's data folder, where the embedded server would start

    migrated = run(tmp_path, "db", "migrate", "-v", "--database-url", empty_db_url, XDG_DATA_HOME=str(home))
    assert migrated.returncode == 0, migrated.stderr
    for f in files:
        assert f"applied {f.path.name}" in migrated.stdout
    assert f"{len(files)} migration(s) applied\n" in migrated.stdout

    status = run(tmp_path, "db", "status", "--database-url", empty_db_url, XDG_DATA_HOME=str(home))
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"database: {redact(empty_db_url)} (DATABASE_URL or --database-url)\n")
    lines = status.stdout.splitlines()
    for f in files:
        assert any(f.version in line and f.name in line and "applied" in line for line in lines), status.stdout
    assert f"{len(files)} applied, 0 pending" in status.stdout

    again = run(tmp_path, "db", "migrate", "--database-url", empty_db_url, XDG_DATA_HOME=str(home))
    assert again.returncode == 0 and "up to date" in again.stdout and again.stderr == ""
    assert not home.exists(), "a URL was given: the embedded server must not start"
    assert not (tmp_path / ".ingest").exists()


def test_a_reader_that_left_the_pipe_gets_no_traceback(tmp_path, db_url):
    """`ingest db status | head -1`: the reader closes the pipe while ingest still writes.
    The read end is closed before ingest starts, so its first write meets a closed pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        clean = {k: v for k, v in os.environ.items() if not k.upper().startswith(("DATABASE_URL", "INGEST_"))}
        result = subprocess.run(
            [str(INGEST), "db", "status", "--database-url", db_url],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=clean,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141  # 128 + SIGPIPE, as a shell reports a tool its reader left


@pytest.mark.parametrize(
    "arguments",
    [
        ["status", "--batch", "not-a-uuid"],
        ["search", "x", "--limit", "0"],
        ["work", "--concurrency", "-1"],
    ],
)
def test_bad_arguments_are_usage_errors_without_traceback(tmp_path, arguments):
    result = subprocess.run(
        [str(INGEST), *arguments, "--database-url", "postgresql://postgres@127.0.0.1:1/x"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "usage:" in result.stderr


def test_health_exits_1_and_names_what_needs_action(db_url, tmp_path):
    import json as json_module

    from ingestion_pipeline.db.connection import connect
    from ingestion_pipeline.db.rpc import IngestionRpc
    from tests.helpers import make_lease_stale, seed_job

    healthy = subprocess.run(
        [str(INGEST), "health", "--database-url", db_url], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    with connect(db_url) as conn:
        _, job_id = seed_job(conn)
        IngestionRpc(conn).claim("worker-1")
        make_lease_stale(conn, job_id)
        conn.execute(
            "insert into documents (source_name, content_sha256, byte_size, status) "
            "values ('ghost.txt', repeat('a', 64), 1, 'indexed')"
        )
    sick = subprocess.run(
        [str(INGEST), "health", "--json", "--database-url", db_url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sick.returncode == 1
    report = json_module.loads(sick.stdout)
    assert report["stale_leases"] == 1 and report["indexed_without_generation"] == 1
    assert len(report["problems"]) == 2
