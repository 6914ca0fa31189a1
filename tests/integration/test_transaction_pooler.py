"""Through a real PgBouncer in transaction mode, with nothing set but DATABASE_URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.db.connection import connect
from tests.helpers import batch
from tests.pooler import pgbouncer

INGEST = Path(sys.executable).with_name("ingest")


@pytest.fixture
def pooler(db_url):
    with pgbouncer(db_url) as running:
        yield running


def test_prepared_statements_collide_behind_the_pooler_when_turned_on(pooler):
    """The failure mode the default avoids: two clients whose transactions share one server
    connection each prepare their first statement under the same name."""
    url = pooler.url(single_server_connection=True)
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as first, \
            psycopg.connect(url, autocommit=True, prepare_threshold=0) as second:
        first.execute("select 1 as one").fetchone()
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            second.execute("select 2 as two").fetchone()


def test_the_default_connection_prepares_nothing(pooler):
    url = pooler.url(single_server_connection=True)
    with connect(url) as first, connect(url) as second:
        for _ in range(10):  # past psycopg's default threshold of five
            assert first.execute("select 1 as one").fetchone() == {"one": 1}
            assert second.execute("select 2 as two").fetchone() == {"two": 2}


def test_enqueue_and_drain_a_folder_through_the_pooler(pooler, db_url, conn, tmp_path):
    """The reproduction of the pooler issue: `ingest enqueue` and `ingest work --drain`
    with DATABASE_URL pointing at PgBouncer (transaction mode) drain the whole batch."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for number in range(120):
        (folder / f"note-{number:03d}.md").write_text(f"# Note {number}\n\nBody of note number {number}.\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    env["DATABASE_URL"] = pooler.url()

    enqueued = subprocess.run([str(INGEST), "enqueue", str(folder), "--json"], env=env, capture_output=True,
                              text=True, timeout=300)
    assert enqueued.returncode == 0, enqueued.stderr
    batch_id = json.loads(enqueued.stdout)["batch_id"]
    drained = subprocess.run([str(INGEST), "work", "--drain", "--json", "--concurrency", "4"], env=env,
                             capture_output=True, text=True, timeout=300)
    assert drained.returncode == 0, drained.stderr
    report = json.loads(drained.stdout)
    assert (report["completed"], report["failed"], report["retried"], report["abandoned"]) == (120, 0, 0, 0), \
        drained.stderr
    assert "prepared statement" not in drained.stderr
    final = batch(conn, batch_id)
    assert (final["status"], final["completed_files"], final["open_files"]) == ("completed", 120, 0)
