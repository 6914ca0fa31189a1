"""Through a real PgBouncer in transaction mode, with nothing set but DATABASE_URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.db import migrate
from ingestion_pipeline.db.connection import connect
from tests.helpers import BusyMigrators, batch
from tests.pooler import pgbouncer
from tests.search_server_off import SEARCH_SERVER_OFF

pytestmark = pytest.mark.pooler

INGEST = Path(sys.executable).with_name("ingest")


def test_prepared_statements_collide_behind_the_pooler_when_turned_on(pooler):
    """The failure mode the default avoids: two clients whose transactions share one server
    connection each prepare their first statement under the same name."""
    url = pooler.url(single_server_connection=True)
    with (
        psycopg.connect(url, autocommit=True, prepare_threshold=0) as first,
        psycopg.connect(url, autocommit=True, prepare_threshold=0) as second,
    ):
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")} | SEARCH_SERVER_OFF
    env["DATABASE_URL"] = pooler.url()

    enqueued = subprocess.run(
        [str(INGEST), "enqueue", str(folder), "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert enqueued.returncode == 0, enqueued.stderr
    batch_id = json.loads(enqueued.stdout)["batch_id"]
    drained = subprocess.run(
        [str(INGEST), "work", "--drain", "--json", "--concurrency", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert drained.returncode == 0, drained.stderr
    report = json.loads(drained.stdout)
    assert (report["completed"], report["failed"], report["retried"], report["abandoned"]) == (120, 0, 0, 0), (
        drained.stderr
    )
    assert "prepared statement" not in drained.stderr
    final = batch(conn, batch_id)
    assert (final["status"], final["completed_files"], final["open_files"]) == ("completed", 120, 0)


def test_migrate_through_the_pooler_applies_everything_and_leaves_no_session_state(empty_db_url):
    """`ingest db migrate` needs no session: its lock is held by an open transaction and its
    lock_timeout is transaction-local, so nothing leaks onto the pooler's server connections."""
    with pgbouncer(empty_db_url) as pooler:
        env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")} | SEARCH_SERVER_OFF
        env["DATABASE_URL"] = pooler.url()
        first = subprocess.run([str(INGEST), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stdout + first.stderr
        again = subprocess.run([str(INGEST), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and "applied" not in again.stdout.replace("already applied", "")
        clients = [connect(pooler.url()) for _ in range(8)]
        try:
            assert {c.execute("show lock_timeout").fetchone()["lock_timeout"] for c in clients} == {"0"}
        finally:
            for client in clients:
                client.close()
    with connect(empty_db_url) as conn:
        applied = [r["version"] for r in conn.execute("select version from ingest_schema_migrations order by 1")]
        # This database's advisory locks only: pg_locks is the whole server's, and on a shared
        # one (TEST_DATABASE_URL) another test's database may hold one at this moment.
        held = conn.execute(
            "select count(*) as n from pg_locks where locktype = 'advisory'"
            " and database = (select oid from pg_database where datname = current_database())"
        ).fetchone()["n"]
    assert applied == [f.version for f in migrate.discover(migrate.default_migrations_dir())]
    assert held == 0


def test_two_migrators_through_the_pooler_apply_each_file_once(empty_db_url, monkeypatch):
    busy = BusyMigrators(monkeypatch)
    with pgbouncer(empty_db_url) as pooler, connect(empty_db_url) as barrier:
        barrier.execute("select pg_advisory_lock(%s)", (migrate.LOCK_KEY,))  # both migrators find it taken
        results: list = []
        threads = [threading.Thread(target=lambda: results.append(migrate.migrate(pooler.url()))) for _ in range(2)]
        for thread in threads:
            thread.start()
        busy.wait_for(2)
        barrier.execute("select pg_advisory_unlock(%s)", (migrate.LOCK_KEY,))
        for thread in threads:
            thread.join(120)
    assert sorted(len(r.newly_applied) for r in results) == [0, len(migrate.discover(migrate.default_migrations_dir()))]
