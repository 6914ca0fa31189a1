"""`ingest demo` (what `make demo` runs), run twice as a user would: the second run finds
every sample indexed, writes no empty batch and starts no Dagster run (issue 48). A first
run on a fresh database is a page a person reads (issue 61): at most 40 lines with the set-up
lines of `make demo` on a fresh clone, migrations in one line, times as times, no Markdown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.db import migrate
from tests.conftest import _fresh_database
from tests.search_server_off import SEARCH_SERVER_OFF

ROOT = Path(__file__).resolve().parents[2]  # the demo runs in the checkout (dagster.yaml)
INGEST = Path(sys.executable).parent / "ingest"


# What `make demo` itself prints on a fresh clone before `ingest demo` (`make -n demo` shows
# them, with the quiet ones: the stamp, the installer's own install): the venv, pip, the two
# installs (uv's `set -x`), the command. The embedded server's
# line (`ingest: started the embedded PostgreSQL …`) is the demo's own, absent here (a URL is
# given), so it counts too.
SET_UP_LINES = 5
EMBEDDED_SERVER_LINE = 1
PAGE = 40


@pytest.fixture
def dagster_db_url(pg_server) -> Iterator[str]:
    """A second fresh database: Dagster's storage."""
    yield from _fresh_database(pg_server, "template0")


def demo(samples: Path, db_url: str, dagster_url: str, data_dir: Path, embedder: str = "hash") -> str:
    env = {
        k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")
    } | SEARCH_SERVER_OFF
    env.update(
        DATABASE_URL=db_url,
        DAGSTER_PG_URL=dagster_url,
        INGEST_DATA_DIR=str(data_dir),
        INGEST_EMBEDDER=embedder,  # hash: no model to load
        INGEST_PARSE_PROCESSES="1",
    )
    done = subprocess.run(
        [str(INGEST), "demo", "--samples", str(samples)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_rerun_with_nothing_new_writes_no_batch_and_runs_nothing(tmp_path, db_url, empty_db_url):
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "leases.md").write_text("# Leases\n\nA worker holds a lease on its job and renews it by heartbeat.")
    (samples / "otters.txt").write_text("River otters hunt fish along the banks of streams.")
    first = demo(samples, db_url, empty_db_url, tmp_path / "data")
    assert "enqueued 2 file(s) into batch" in first and "materialized document_index" in first

    again = demo(samples, db_url, empty_db_url, tmp_path / "data")
    assert "2 file(s) unchanged (already indexed): no batch was written and no run is needed" in again
    assert "Dagster run" not in again and "enqueued" not in again
    assert "Leases" in again  # the search still shows the index
    with psycopg.connect(db_url) as conn:
        assert conn.execute("select name from import_batches").fetchall() == [("demo samples",)]
    with psycopg.connect(empty_db_url) as conn:
        assert conn.execute("select count(*) from runs").fetchone() == (1,)


def test_a_first_demo_is_a_page_a_person_reads(tmp_path, empty_db_url, dagster_db_url):
    migrations = migrate.discover(migrate.default_migrations_dir())
    out = demo(ROOT / "samples", empty_db_url, dagster_db_url, tmp_path / "data", embedder="wordllama")
    lines = out.splitlines()
    assert len(lines) + SET_UP_LINES + EMBEDDED_SERVER_LINE <= PAGE, out
    assert lines[0] == f"applied {len(migrations)} migration(s) (`ingest demo -v` lists them)"
    assert not [line for line in lines if line.startswith("applied 2")]  # no file names
    # the materialization: the index beside this run, its time a time, its tables plain
    assert re.search(r"^the index +this run", out, re.MULTILINE)
    assert re.search(r"^documents +4 \(indexed 4\) +run_claimed +4 *$", out, re.MULTILINE), out
    assert re.search(r"last_job_finished_at +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", out), out
    assert not re.search(r"\b1\d{9}\.\d+\b", out)  # no epoch seconds
    assert not [line for line in lines if line.lstrip().startswith("|") or "| ---" in line]  # no Markdown
    assert re.search(r"^format +completed +s per job +share of job time$", out, re.MULTILINE), out
    assert "batch " in out and "4 of 4 file(s) indexed, 0 failed" in out
    assert all(len(line) <= 200 for line in lines), max(lines, key=len)


def test_migrations_are_one_line_and_listed_on_request(tmp_path, empty_db_url):
    """`ingest db migrate` as the README's tour starts: one line; `-v` lists each file."""
    count = len(migrate.discover(migrate.default_migrations_dir()))
    env = {
        k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")
    } | SEARCH_SERVER_OFF
    env.update(INGEST_DATA_DIR=str(tmp_path / "data"), INGEST_EMBEDDER="hash")
    done = subprocess.run(
        [str(INGEST), "db", "migrate", "--database-url", empty_db_url],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"{count} migration(s) applied (-v lists them)"
    assert len(done.stdout.splitlines()) == 2  # and the vector index's line
