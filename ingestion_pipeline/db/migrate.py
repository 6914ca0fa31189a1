"""Apply `migrations/<14-digit version>_<name>.sql` in order, with a checksummed ledger.

Safety rules, all checked before anything is applied (so a refused run changes nothing):
- an applied file whose bytes changed (sha256) is refused;
- an applied file that is missing from the folder is refused, unless its version is newer
  than every file in the folder: then the database is *ahead* of this release (a newer
  release migrated it; expand/contract: migrate first, redeploy workers after). Commands
  that need the schema accept it with a warning when every file the release knows is
  applied unchanged; `migrate` has nothing to apply and says so;
- a new file whose version sorts before the newest applied one is refused (so a release
  with files still pending never runs against a database that is ahead of it).

Each file runs in its own transaction together with its ledger row. A file whose first
line is `-- ingest:no-transaction` runs outside a transaction (for `CREATE INDEX
CONCURRENTLY`); it is split into statements on lines ending in `;`, so it must not hold
dollar-quoted bodies. Its statements run without the migrator's lock_timeout: `CREATE/DROP
INDEX CONCURRENTLY` (and `REINDEX … CONCURRENTLY`) never queue writers, and the timeout
would only abort their wait for older transactions. When a `CREATE INDEX CONCURRENTLY` fails, the
INVALID index it leaves is dropped; and the file is recorded only when every index it
creates is valid (an `IF NOT EXISTS` rerun would skip an INVALID leftover).

Two migrators never interleave, and the second one finds nothing left to do: a second
connection holds a transaction-scoped advisory lock in an open transaction for the whole
run. A migrator that finds the lock taken tries again every LOCK_POLL_SECONDS instead of
waiting in the server (a waiting statement holds a snapshot, which a running `CREATE INDEX
CONCURRENTLY` would wait for: both would hang). Nothing relies on session state (no
session-level lock or SET; the lock_timeout is transaction-local), so `migrate` also works
through a transaction-mode pooler, where
consecutive transactions may run on different server connections (the pool needs two
server connections for it). A server whose idle_in_transaction_session_timeout is shorter
than the run would end the lock holder's transaction: the run then stops with an error.

The run is split in three modules: db/migration_plan.py (the files, the ledger, the checks and
the plan), db/migration_indexes.py (the concurrent index statements and their validity) and this
one (the lock, applying each file, recording it). Every name is importable from here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import psycopg.sql
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import connect, one_row
from ingestion_pipeline.db.migration_indexes import CONCURRENT_INDEX, CREATE_INDEX, _code, _index_validity
from ingestion_pipeline.db.migration_plan import (
    FILENAME,
    NO_TRANSACTION_MARKER,
    NOT_MIGRATIONS,
    AppliedMigration,
    MigrationFile,
    Plan,
    _check_target,
    _up_to,
    ahead_of,
    default_migrations_dir,
    describe_ahead,
    discover,
    pending_after_checks,
    read_ledger,
    split_statements,
)
from ingestion_pipeline.db.queries import query, sql_text
from ingestion_pipeline.errors import MigrationError

__all__ = [
    "CONCURRENT_INDEX",
    "CREATE_INDEX",
    "FILENAME",
    "LOCK_KEY",
    "LOCK_POLL_SECONDS",
    "LOCK_TIMEOUT",
    "NOT_MIGRATIONS",
    "NO_TRANSACTION_MARKER",
    "AppliedMigration",
    "MigrationFile",
    "Plan",
    "ahead_of",
    "default_migrations_dir",
    "describe_ahead",
    "discover",
    "migrate",
    "pending_after_checks",
    "plan",
    "read_ledger",
    "split_statements",
]

log = logging.getLogger(__name__)

LOCK_KEY = 72_410_193_001  # arbitrary, fixed: identifies "ingest db migrate" in pg_locks
# A migration that waits for a table lock queues every later writer behind it (the whole
# job queue stalls); give up instead and say so.
LOCK_TIMEOUT = "10s"
LOCK_POLL_SECONDS = 0.5


def plan(url: str, folder: Path | None = None, target: str | None = None) -> Plan:
    """What a run would do, read-only (no lock, no ledger table created)."""
    files = discover(folder or default_migrations_dir())
    with connect(url) as conn:
        applied = read_ledger(conn)
    pending = pending_after_checks(files, applied)
    return Plan(applied=applied, pending=_up_to(pending, target), ahead=ahead_of(files, applied))


def migrate(
    url: str,
    folder: Path | None = None,
    target: str | None = None,
    on_apply: Callable[[MigrationFile, int], None] | None = None,
) -> Plan:
    """Apply pending migrations (up to `target` inclusive) under the migration lock."""
    files = discover(folder or default_migrations_dir())
    _check_target(target)
    with connect(url) as conn, connect(url, autocommit=False) as holder:
        _take_lock(holder)  # held until the holder's transaction ends, with the connection
        # Read and check under the lock: another migrator may have just finished.
        applied = read_ledger(conn)
        result = Plan(
            applied=applied,
            pending=_up_to(pending_after_checks(files, applied), target),
            ahead=ahead_of(files, applied),
        )
        if result.pending:
            conn.execute(sql_text("ledger.sql"))
        for migration in result.pending:
            duration_ms = _apply(conn, migration)
            _still_locked(holder, migration)
            result.newly_applied.append(migration)
            if on_apply:
                on_apply(migration, duration_ms)
        return result


def _take_lock(holder: psycopg.Connection[DictRow]) -> None:
    statement = psycopg.sql.SQL(query("migration_lock")).format(key=psycopg.sql.Literal(LOCK_KEY))
    while not one_row(holder.execute(statement))["locked"]:
        holder.rollback()  # hold no transaction (and no snapshot) between tries
        _lock_busy()
        time.sleep(LOCK_POLL_SECONDS)


def _lock_busy() -> None:
    """Called before each retry while another migrator runs (tests observe it)."""
    log.info("another migrator holds the migration lock; trying again in %ss", LOCK_POLL_SECONDS)


def _still_locked(holder: psycopg.Connection[DictRow], migration: MigrationFile) -> None:
    """The holder's transaction (and so the lock) must have lasted through the file."""
    try:
        holder.execute("select 1")
    except psycopg.Error as exc:
        raise MigrationError(
            f"the migration lock was lost while {migration.path.name} ran (it is applied; the run stops): {_brief(exc)}"
        ) from exc


def _apply(conn: psycopg.Connection[DictRow], migration: MigrationFile) -> int:
    started = time.monotonic()
    try:
        if migration.transactional:
            with conn.transaction():
                conn.execute(query("migration_lock_timeout"), {"timeout": LOCK_TIMEOUT})
                # No parameters: psycopg sends the file with the simple query protocol,
                # so it may hold many statements and dollar-quoted function bodies.
                conn.execute(migration.sql)
                _record(conn, migration, started)
        else:
            _apply_without_transaction(conn, migration, started)
            _record(conn, migration, started)
    except psycopg.Error as exc:
        raise MigrationError(f"migration {migration.path.name} failed and was rolled back: {_brief(exc)}") from exc
    return _elapsed_ms(started)


def _apply_without_transaction(conn: psycopg.Connection[DictRow], migration: MigrationFile, started: float) -> None:
    statements = split_statements(migration)
    for number, statement in enumerate(statements, start=1):
        try:
            conn.execute(statement)
        except psycopg.Error as exc:
            stayed = f"statements 1..{number - 1} stay applied" if number > 1 else "nothing before it ran"
            raise MigrationError(
                f"no-transaction migration {migration.path.name} failed at statement {number} of "
                f"{len(statements)}: {_brief(exc)}{_drop_invalid_index(conn, statement)}; {stayed} and the "
                "file is not recorded, so make its statements re-runnable (IF NOT EXISTS) and run again"
            ) from exc
    _refuse_invalid_indexes(conn, migration, statements)


def _drop_invalid_index(conn: psycopg.Connection[DictRow], statement: str) -> str:
    """A failed CREATE INDEX CONCURRENTLY leaves its index behind, INVALID (unused by
    queries, still maintained by writes); a rerun with IF NOT EXISTS would skip it. Drop
    it now; the error message says so."""
    if conn.closed or conn.broken or not CONCURRENT_INDEX.match(_code(statement)):
        return ""
    found = None
    try:
        found = _index_validity(conn, statement)
        if not found or found[2]:
            return ""
        conn.execute(
            psycopg.sql.SQL("drop index concurrently if exists {}").format(psycopg.sql.Identifier(found[0], found[1]))
        )
    except psycopg.Error as exc:
        if not found:
            return ""
        return (
            f" (it left the INVALID index {found[1]}, which could not be dropped: {_brief(exc)}; "
            f"drop index concurrently {found[1]} before running again)"
        )
    return f" (the INVALID index {found[1]} it left was dropped)"


def _refuse_invalid_indexes(conn: psycopg.Connection[DictRow], migration: MigrationFile, statements: list[str]) -> None:
    """Before recording the file: every index it creates exists and is valid. (`IF NOT
    EXISTS` skips an INVALID leftover of an interrupted concurrent build.)"""
    for statement in statements:
        found = _index_validity(conn, statement)
        if found and not found[2]:
            raise MigrationError(
                f"no-transaction migration {migration.path.name} was not recorded: index {found[1]} is "
                "INVALID (left by a failed or interrupted CREATE INDEX CONCURRENTLY, which IF NOT EXISTS "
                f"skipped); drop index concurrently {found[1]}, then run again"
            )


def _record(conn: psycopg.Connection[DictRow], migration: MigrationFile, started: float) -> None:
    conn.execute(
        query("ledger_record"),
        {
            "version": migration.version,
            "name": migration.name,
            "checksum": migration.checksum,
            "transactional": migration.transactional,
            "duration_ms": _elapsed_ms(started),
        },
    )


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _brief(exc: psycopg.Error) -> str:
    diag = exc.diag
    where = f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else ""
    hint = ""
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        hint = f"; a lock was not granted within {LOCK_TIMEOUT} (a long transaction holds it): retry later"
    return f"{(diag.message_primary or str(exc)).strip()}{where}{hint}"
