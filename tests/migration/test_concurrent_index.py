"""No-transaction migrations that build indexes concurrently: a failed `CREATE INDEX
CONCURRENTLY` leaves an INVALID index behind; the migrator must never record the file as
applied over it, and the short lock_timeout must not cut a concurrent build's waits."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.db import migrate
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.errors import MigrationError
from tests.helpers import Background, backend_pid, wait_until_blocked

V1, V2 = "20260101000001", "20260101000002"
UNIQUE_INDEX = (
    "-- ingest:no-transaction\ncreate unique index concurrently if not exists items_code_key on items (code);\n"
)


def versions(url: str) -> list[str]:
    with connect(url) as conn:
        return [r["version"] for r in conn.execute("select version from ingest_schema_migrations order by version")]


def index_state(url: str, name: str) -> bool | None:
    """indisvalid of the index, None when there is none."""
    with connect(url) as conn:
        row = conn.execute(
            "select i.indisvalid from pg_index i join pg_class c on c.oid = i.indexrelid where c.relname = %s", (name,)
        ).fetchone()
    return None if row is None else row["indisvalid"]


def items_with_duplicates(folder: Path) -> None:
    (folder / f"{V1}_items.sql").write_text(
        "create table items (id int primary key, code text);\ninsert into items values (1, 'a'), (2, 'a'), (3, 'b');\n"
    )


def test_failed_concurrent_unique_index_is_dropped_and_the_rerun_records_nothing_invalid(empty_db_url, migrations_dir):
    items_with_duplicates(migrations_dir)
    (migrations_dir / f"{V2}_items_code_key.sql").write_text(UNIQUE_INDEX)

    with pytest.raises(MigrationError, match="items_code_key") as failed:
        migrate.migrate(empty_db_url, migrations_dir)
    assert "dropped" in str(failed.value)
    assert index_state(empty_db_url, "items_code_key") is None  # the INVALID leftover is gone
    assert versions(empty_db_url) == [V1]

    # The rerun the message advises (IF NOT EXISTS) fails again instead of skipping the
    # leftover and recording the file as applied.
    with pytest.raises(MigrationError, match="items_code_key"):
        migrate.migrate(empty_db_url, migrations_dir)
    assert versions(empty_db_url) == [V1]
    assert index_state(empty_db_url, "items_code_key") is None

    with connect(empty_db_url) as conn:
        conn.execute("delete from items where id = 2")
    migrate.migrate(empty_db_url, migrations_dir)
    assert versions(empty_db_url) == [V1, V2]
    assert index_state(empty_db_url, "items_code_key") is True


def test_an_invalid_index_left_by_an_interrupted_build_is_never_recorded_as_applied(empty_db_url, migrations_dir):
    """A migrator killed mid-build could not drop its INVALID index: `IF NOT EXISTS` then
    skips the build. The file must not be recorded; the message says what to do."""
    items_with_duplicates(migrations_dir)
    migrate.migrate(empty_db_url, migrations_dir)
    with connect(empty_db_url) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("create unique index concurrently items_code_key on items (code)")
        conn.execute("delete from items where id = 2")
    assert index_state(empty_db_url, "items_code_key") is False
    (migrations_dir / f"{V2}_items_code_key.sql").write_text(UNIQUE_INDEX)

    with pytest.raises(MigrationError, match=r"items_code_key.*INVALID.*drop index concurrently"):
        migrate.migrate(empty_db_url, migrations_dir)
    assert versions(empty_db_url) == [V1]

    with connect(empty_db_url) as conn:
        conn.execute("drop index concurrently items_code_key")
    migrate.migrate(empty_db_url, migrations_dir)
    assert versions(empty_db_url) == [V1, V2]
    assert index_state(empty_db_url, "items_code_key") is True


def test_lock_timeout_does_not_cut_a_concurrent_build_waiting_for_old_transactions(
    empty_db_url, migrations_dir, monkeypatch
):
    """CREATE INDEX CONCURRENTLY takes SHARE UPDATE EXCLUSIVE (writers go on) and then waits
    for transactions older than it; the migrator's lock_timeout (here shortened) would
    abort that wait and leave an INVALID index."""
    monkeypatch.setattr(migrate, "LOCK_TIMEOUT", "200ms")
    items_with_duplicates(migrations_dir)
    migrate.migrate(empty_db_url, migrations_dir)
    with connect(empty_db_url) as conn:
        conn.execute("delete from items where id = 2")
    (migrations_dir / f"{V2}_items_code_key.sql").write_text(UNIQUE_INDEX)

    with connect(empty_db_url) as observer, connect(empty_db_url, autocommit=False) as old_writer:
        old_writer.execute("insert into items values (10, 'z')")  # an open transaction with an xid
        writer_pid = backend_pid(old_writer)
        run = Background(lambda: migrate.migrate(empty_db_url, migrations_dir))
        builder_pid = None
        for _ in range(1500):
            row = observer.execute(
                "select pid from pg_stat_activity where query ilike '%%create unique index concurrently%%' "
                "and datname = current_database() and pid <> pg_backend_pid()"
            ).fetchone()
            if row:
                builder_pid = row["pid"]
                break
            if not run.thread.is_alive():
                break
            run.thread.join(0.01)
        if builder_pid is None:
            run.join()  # it ended: raises what stopped it
        assert builder_pid is not None, "the build never started"
        wait_until_blocked(observer, builder_pid, by=writer_pid)
        run.thread.join(1.0)  # five times the lock_timeout
        assert run.thread.is_alive(), f"the build gave up: {run.error}"
        old_writer.commit()
        run.join()

    assert versions(empty_db_url) == [V1, V2]
    assert index_state(empty_db_url, "items_code_key") is True


@pytest.mark.parametrize(
    "statement, concurrent",
    [
        ("-- ingest:no-transaction\ncreate index concurrently if not exists a on t (x);", True),
        ("CREATE UNIQUE INDEX CONCURRENTLY a ON t (x);", True),
        ("drop index concurrently if exists a;", True),
        ("reindex (verbose) index concurrently a;", True),
        ("reindex table concurrently t;", True),
        ("create index a on t (x);", False),
        ("alter table t add column y int;", False),
    ],
)
def test_which_statements_run_without_the_lock_timeout(statement, concurrent):
    assert bool(migrate.CONCURRENT_INDEX.match(migrate._code(statement))) is concurrent
