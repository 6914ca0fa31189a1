"""The migrator against a real, empty database, with small synthetic migration folders.

Every synthetic migration inserts one row into `applied_effects`, so a test can count
how many times each file's SQL really ran (independently of the ledger).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ingestion_pipeline import cli
from ingestion_pipeline.db import migrate
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.errors import MigrationError
from tests.helpers import Background, BusyMigrators
from tests.migration.migration_files import V1, V2, V3, effects, ledger, versions, write


def table_exists(url: str, name: str) -> bool:
    with connect(url) as conn:
        return conn.execute("select to_regclass(%s) is not null as p", (f"public.{name}",)).fetchone()["p"]


def three_files(folder: Path) -> list[Path]:
    return [write(folder, V1, "create_a"), write(folder, V2, "create_b"), write(folder, V3, "create_c")]


def test_files_apply_in_version_order_with_checksums(empty_db_url, migrations_dir):
    # Written out of order: the folder order, not creation order, decides.
    c = write(migrations_dir, V3, "create_c", "create table c (id int references b (id));\n")
    b = write(migrations_dir, V2, "create_b", "create table b (id int primary key references create_a (id));\n")
    a = write(migrations_dir, V1, "create_a")

    result = migrate.migrate(empty_db_url, migrations_dir)

    assert [m.version for m in result.newly_applied] == [V1, V2, V3]
    rows = ledger(empty_db_url)
    assert [(r["version"], r["name"]) for r in rows] == [(V1, "create_a"), (V2, "create_b"), (V3, "create_c")]
    for row, path in zip(rows, [a, b, c], strict=True):
        assert row["checksum"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert row["duration_ms"] >= 0
        assert row["transactional"] is True
    assert effects(empty_db_url) == [V1, V2, V3]


def test_rerun_applies_nothing(empty_db_url, migrations_dir):
    three_files(migrations_dir)
    migrate.migrate(empty_db_url, migrations_dir)
    before = ledger(empty_db_url)

    again = migrate.migrate(empty_db_url, migrations_dir)

    assert again.newly_applied == [] and again.pending == []
    assert ledger(empty_db_url) == before
    assert effects(empty_db_url) == [V1, V2, V3]


def test_edited_applied_file_is_refused_and_nothing_changes(empty_db_url, migrations_dir):
    a, _ = write(migrations_dir, V1, "create_a"), write(migrations_dir, V2, "create_b")
    migrate.migrate(empty_db_url, migrations_dir)
    before = ledger(empty_db_url)
    a.write_text(a.read_text() + "-- an innocent-looking edit\n")
    write(migrations_dir, V3, "create_c")  # a new pending file at the same time

    with pytest.raises(MigrationError) as refused:
        migrate.migrate(empty_db_url, migrations_dir)

    assert a.name in str(refused.value) and "changed" in str(refused.value)
    assert ledger(empty_db_url) == before
    assert not table_exists(empty_db_url, "create_c")
    assert effects(empty_db_url) == [V1, V2]


def test_missing_applied_file_is_refused(empty_db_url, migrations_dir):
    _, b, _ = three_files(migrations_dir)
    migrate.migrate(empty_db_url, migrations_dir)
    before = ledger(empty_db_url)
    b.unlink()

    with pytest.raises(MigrationError, match=f"{V2}_create_b.sql.*missing"):
        migrate.migrate(empty_db_url, migrations_dir)
    with pytest.raises(MigrationError, match="missing"):
        migrate.plan(empty_db_url, migrations_dir)
    assert ledger(empty_db_url) == before


def test_out_of_order_new_file_is_refused_and_nothing_applied(empty_db_url, migrations_dir):
    write(migrations_dir, V2, "create_b")
    migrate.migrate(empty_db_url, migrations_dir)
    before = ledger(empty_db_url)
    late = write(migrations_dir, V1, "create_a")
    write(migrations_dir, V3, "create_c")

    with pytest.raises(MigrationError, match=late.name):
        migrate.migrate(empty_db_url, migrations_dir)

    assert ledger(empty_db_url) == before
    assert not table_exists(empty_db_url, "create_a") and not table_exists(empty_db_url, "create_c")


def test_failing_migration_is_rolled_back_and_earlier_files_stay(empty_db_url, migrations_dir):
    write(migrations_dir, V1, "create_a")
    bad = write(
        migrations_dir,
        V2,
        "create_b",
        "create table b (id int primary key);\ninsert into b values (1);\nselect 1 / 0;\n",
    )
    write(migrations_dir, V3, "create_c")

    with pytest.raises(MigrationError) as failed:
        migrate.migrate(empty_db_url, migrations_dir)

    assert bad.name in str(failed.value)
    assert versions(empty_db_url) == [V1]
    assert table_exists(empty_db_url, "create_a")
    assert not table_exists(empty_db_url, "b") and not table_exists(empty_db_url, "create_c")
    assert effects(empty_db_url) == [V1]


def test_no_transaction_marker_allows_create_index_concurrently(empty_db_url, migrations_dir):
    write(migrations_dir, V1, "create_a")
    (migrations_dir / f"{V2}_index_a.sql").write_text(
        "-- ingest:no-transaction\n-- built without locking writers\n"
        "create index concurrently a_id_desc on create_a (id desc);\n"
    )

    migrate.migrate(empty_db_url, migrations_dir)

    rows = ledger(empty_db_url)
    assert [(r["version"], r["transactional"]) for r in rows] == [(V1, True), (V2, False)]
    with connect(empty_db_url) as conn:
        index = conn.execute(
            "select i.indisvalid from pg_index i join pg_class c on c.oid = i.indexrelid where c.relname = 'a_id_desc'"
        ).fetchone()
    assert index == {"indisvalid": True}


def test_create_index_concurrently_fails_inside_a_transaction(empty_db_url, migrations_dir):
    write(migrations_dir, V1, "create_a")
    (migrations_dir / f"{V2}_index_a.sql").write_text("create index concurrently a_id_desc on create_a (id desc);\n")

    with pytest.raises(MigrationError, match="index_a"):
        migrate.migrate(empty_db_url, migrations_dir)
    assert versions(empty_db_url) == [V1]


def test_no_transaction_file_with_dollar_quoting_is_refused(empty_db_url, migrations_dir):
    write(migrations_dir, V1, "create_a")
    migrate.migrate(empty_db_url, migrations_dir)
    before = ledger(empty_db_url)
    (migrations_dir / f"{V2}_add_function.sql").write_text(
        "-- ingest:no-transaction\ncreate function one() returns int language sql as $$ select 1; $$;\n"
    )

    with pytest.raises(MigrationError, match="dollar-quoted"):
        migrate.migrate(empty_db_url, migrations_dir)

    assert ledger(empty_db_url) == before
    with connect(empty_db_url) as conn:
        assert conn.execute("select to_regproc('public.one') is null as gone").fetchone()["gone"]


@pytest.mark.parametrize(
    "bad_name",
    [
        "2026010100001_short_version.sql",
        "20260101000001-dash.sql",
        "20260101000001_CamelCase.sql",
        "20260101000001_.sql",
        "create_a.sql",
    ],
)
def test_badly_named_sql_file_is_refused(empty_db_url, migrations_dir, bad_name):
    write(migrations_dir, V1, "create_a")
    (migrations_dir / bad_name).write_text("select 1;\n")

    with pytest.raises(MigrationError, match=bad_name):
        migrate.migrate(empty_db_url, migrations_dir)
    assert effects(empty_db_url) == []


def test_two_files_with_one_version_are_refused(migrations_dir):
    write(migrations_dir, V1, "create_a")
    write(migrations_dir, V1, "create_b")

    with pytest.raises(MigrationError, match=V1):
        migrate.discover(migrations_dir)


def test_schema_snapshot_and_other_files_are_ignored(empty_db_url, migrations_dir):
    write(migrations_dir, V1, "create_a")
    (migrations_dir / "schema.sql").write_text("this is not sql and must never run;\n")
    (migrations_dir / "README.md").write_text("notes\n")

    result = migrate.migrate(empty_db_url, migrations_dir)

    assert [m.path.name for m in result.newly_applied] == [f"{V1}_create_a.sql"]
    assert versions(empty_db_url) == [V1]


def test_target_applies_only_up_to_that_version(empty_db_url, migrations_dir):
    three_files(migrations_dir)

    first = migrate.migrate(empty_db_url, migrations_dir, target=V2)
    assert [m.version for m in first.newly_applied] == [V1, V2]
    assert versions(empty_db_url) == [V1, V2] and effects(empty_db_url) == [V1, V2]

    rest = migrate.migrate(empty_db_url, migrations_dir)
    assert [m.version for m in rest.newly_applied] == [V3]


def test_target_must_be_a_version(empty_db_url, migrations_dir):
    three_files(migrations_dir)
    with pytest.raises(MigrationError, match="14-digit"):
        migrate.migrate(empty_db_url, migrations_dir, target="latest")
    assert effects(empty_db_url) == []
    assert not table_exists(empty_db_url, "ingest_schema_migrations")  # a refused run creates nothing


def test_unsplittable_no_transaction_file_refuses_the_whole_run(empty_db_url, migrations_dir):
    """Checked before anything runs: the earlier pending file is not applied either."""
    write(migrations_dir, V1, "create_a")
    (migrations_dir / f"{V2}_add_function.sql").write_text(
        "-- ingest:no-transaction\ncreate function one() returns int language sql as $$ select 1; $$;\n"
    )
    with pytest.raises(MigrationError, match="dollar-quoted"):
        migrate.migrate(empty_db_url, migrations_dir)
    assert effects(empty_db_url) == []
    assert not table_exists(empty_db_url, "ingest_schema_migrations")


def test_failing_no_transaction_file_says_what_stayed_applied(empty_db_url, migrations_dir):
    (migrations_dir / f"{V1}_indexes.sql").write_text(
        "-- ingest:no-transaction\n"
        "create table t (id int);\n"
        "create index concurrently t_missing on no_such_table (id);\n"
    )
    with pytest.raises(MigrationError, match=r"statement 2 of 2.*stay applied"):
        migrate.migrate(empty_db_url, migrations_dir)
    assert versions(empty_db_url) == []
    assert table_exists(empty_db_url, "t")  # what the message promised


def test_plan_on_empty_database_creates_nothing_and_lists_pending(empty_db_url, migrations_dir):
    three_files(migrations_dir)

    plan = migrate.plan(empty_db_url, migrations_dir)

    assert plan.applied == []
    assert [m.version for m in plan.pending] == [V1, V2, V3]
    with connect(empty_db_url) as conn:
        assert conn.execute("select to_regclass('public.ingest_schema_migrations') is null as none").fetchone()["none"]
        assert conn.execute("select count(*) as n from pg_tables where schemaname = 'public'").fetchone()["n"] == 0


def test_plan_after_partial_migrate_lists_applied_and_pending(empty_db_url, migrations_dir):
    three_files(migrations_dir)
    migrate.migrate(empty_db_url, migrations_dir, target=V1)

    plan = migrate.plan(empty_db_url, migrations_dir, target=V2)

    assert [m.version for m in plan.applied] == [V1]
    assert [m.version for m in plan.pending] == [V2]
    assert versions(empty_db_url) == [V1]


def test_cli_dry_run_prints_pending_and_changes_nothing(empty_db_url, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.delenv("DATABASE_URL", raising=False)
    real = migrate.discover(migrate.default_migrations_dir())

    code = cli.main(["db", "migrate", "--dry-run", "--database-url", empty_db_url])

    out = capsys.readouterr().out
    assert code == 0
    for m in real:
        assert any(m.version in line and m.name in line and "pending" in line for line in out.splitlines())
    assert f"0 applied, {len(real)} pending" in out
    assert "nothing was changed" in out
    with connect(empty_db_url) as conn:
        assert conn.execute("select to_regclass('public.ingest_schema_migrations') is null as none").fetchone()["none"]


def run_two_migrators_behind_the_lock(url, migrations_dir, monkeypatch) -> list:
    busy = BusyMigrators(monkeypatch)
    with connect(url) as holder:
        holder.execute("select pg_advisory_lock(%s)", (migrate.LOCK_KEY,))
        first = Background(lambda: migrate.migrate(url, migrations_dir))
        second = Background(lambda: migrate.migrate(url, migrations_dir))
        busy.wait_for(2)
        assert versions(url) == []  # nothing ran while the lock was held
        holder.execute("select pg_advisory_unlock(%s)", (migrate.LOCK_KEY,))
        for run in (first, second):
            run.thread.join(60)
            assert not run.thread.is_alive(), "a migrator hung"
        return [first.join(), second.join()]


def test_two_concurrent_migrators_apply_each_file_once(empty_db_url, migrations_dir, monkeypatch):
    three_files(migrations_dir)
    results = run_two_migrators_behind_the_lock(empty_db_url, migrations_dir, monkeypatch)

    assert versions(empty_db_url) == [V1, V2, V3]
    assert sorted(len(r.newly_applied) for r in results) == [0, 3]
    assert effects(empty_db_url) == [V1, V2, V3]


def test_a_waiting_migrator_does_not_hang_the_running_ones_concurrent_index_build(
    empty_db_url, migrations_dir, monkeypatch
):
    """CREATE INDEX CONCURRENTLY waits for every transaction holding an older snapshot. A
    migrator waiting in the server for the lock (pg_advisory_lock) holds one while it waits
    for the running migrator, whose build waits for it: both hang. Waiting migrators poll."""
    write(migrations_dir, V1, "create_a")
    (migrations_dir / f"{V2}_index_a.sql").write_text(
        "-- ingest:no-transaction\ncreate index concurrently if not exists a_id_desc on create_a (id desc);\n"
    )
    results = run_two_migrators_behind_the_lock(empty_db_url, migrations_dir, monkeypatch)
    assert sorted(len(r.newly_applied) for r in results) == [0, 2]
    assert versions(empty_db_url) == [V1, V2]


def test_lock_is_released_after_a_failed_run(empty_db_url, migrations_dir):
    write(migrations_dir, V1, "create_a", "select 1 / 0;\n")
    with pytest.raises(MigrationError):
        migrate.migrate(empty_db_url, migrations_dir)

    with connect(empty_db_url) as conn:
        assert conn.execute("select pg_try_advisory_lock(%s) as got", (migrate.LOCK_KEY,)).fetchone()["got"]


def test_project_migrations_apply_to_empty_database_and_rerun_is_noop(empty_db_url):
    folder = migrate.default_migrations_dir()
    files = migrate.discover(folder)
    assert files, "the project has no migrations"

    applied = migrate.migrate(empty_db_url)

    assert [m.version for m in applied.newly_applied] == [f.version for f in files]
    rows = ledger(empty_db_url)
    assert [(r["version"], r["name"], r["checksum"]) for r in rows] == [(f.version, f.name, f.checksum) for f in files]
    again = migrate.migrate(empty_db_url)
    assert again.newly_applied == []
    assert ledger(empty_db_url) == rows
