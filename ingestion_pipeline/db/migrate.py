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
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psycopg
import psycopg.sql
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import connect, one_row
from ingestion_pipeline.db.queries import query, sql_text
from ingestion_pipeline.errors import MigrationError

log = logging.getLogger(__name__)

LOCK_KEY = 72_410_193_001  # arbitrary, fixed: identifies "ingest db migrate" in pg_locks
# A migration that waits for a table lock queues every later writer behind it (the whole
# job queue stalls); give up instead and say so.
LOCK_TIMEOUT = "10s"
LOCK_POLL_SECONDS = 0.5
NO_TRANSACTION_MARKER = "-- ingest:no-transaction"
FILENAME = re.compile(r"^(?P<version>\d{14})_(?P<name>[a-z0-9_]+)\.sql$")
NOT_MIGRATIONS = {"schema.sql"}  # generated snapshot kept beside the migrations


@dataclass(frozen=True)
class MigrationFile:
    version: str
    name: str
    path: Path
    sql: str
    checksum: str

    @property
    def transactional(self) -> bool:
        first_line = self.sql.split("\n", 1)[0].strip()
        return first_line != NO_TRANSACTION_MARKER


@dataclass(frozen=True)
class AppliedMigration:
    version: str
    name: str
    checksum: str
    transactional: bool
    applied_at: datetime
    duration_ms: int


@dataclass
class Plan:
    applied: list[AppliedMigration]
    pending: list[MigrationFile]
    newly_applied: list[MigrationFile] = field(default_factory=list)
    # Applied versions newer than every file this release has (a newer release migrated).
    ahead: list[AppliedMigration] = field(default_factory=list)


def default_migrations_dir() -> Path:
    """Inside an installed wheel the files sit in the package; in a checkout, at the top."""
    package_dir = Path(__file__).resolve().parents[1]
    for candidate in (package_dir / "migrations", package_dir.parent / "migrations"):
        if candidate.is_dir():
            return candidate
    raise MigrationError(f"no migrations folder found next to {package_dir}")


def discover(folder: Path) -> list[MigrationFile]:
    files = []
    for path in sorted(Path(folder).glob("*.sql")):
        if path.name in NOT_MIGRATIONS:
            continue
        match = FILENAME.match(path.name)
        if not match:
            raise MigrationError(
                f"{path.name}: migration files must be named <14-digit timestamp>_<lower_snake_name>.sql"
            )
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MigrationError(f"{path.name} is not UTF-8 text (byte {exc.start})") from None
        files.append(
            MigrationFile(
                version=match["version"],
                name=match["name"],
                path=path,
                sql=text,
                checksum=hashlib.sha256(raw).hexdigest(),
            )
        )
    versions = [f.version for f in files]
    duplicates = sorted({v for v in versions if versions.count(v) > 1})
    if duplicates:
        raise MigrationError(f"two migration files share version {duplicates[0]}")
    return files


def pending_after_checks(files: list[MigrationFile], applied: list[AppliedMigration]) -> list[MigrationFile]:
    """The files still to apply, or MigrationError when the ledger and folder disagree."""
    by_version = {f.version: f for f in files}
    newest_known = max(by_version, default="")
    for row in applied:
        current = by_version.get(row.version)
        if current is None and row.version > newest_known:
            continue  # ahead of this release: see ahead_of()
        if current is None:
            raise MigrationError(
                f"migration {row.version}_{row.name}.sql was applied but is missing from the "
                "migrations folder; restore it (applied files are never deleted)"
            )
        if current.checksum != row.checksum:
            raise MigrationError(
                f"migration {current.path.name} changed after it was applied "
                f"(ledger sha256 {row.checksum[:12]}…, file {current.checksum[:12]}…); "
                "revert the edit and put the change in a new migration"
            )
    newest = max((row.version for row in applied), default="")
    applied_versions = {row.version for row in applied}
    pending = [f for f in files if f.version not in applied_versions]
    ahead = ahead_of(files, applied)
    for f in pending:
        if f.version < newest and ahead:
            raise MigrationError(
                f"migration {f.path.name} of this release is not applied, but the database has newer "
                f"migrations this release does not know ({describe_ahead(ahead)}): run the newer release's "
                "`ingest db migrate`, not this one's"
            )
        if f.version < newest:
            raise MigrationError(
                f"migration {f.path.name} is older than the newest applied migration ({newest}); "
                "give it a timestamp after that one"
            )
        if not f.transactional:
            split_statements(f)  # refuses a file it cannot split, before anything runs
    return pending


def ahead_of(files: list[MigrationFile], applied: list[AppliedMigration]) -> list[AppliedMigration]:
    """Applied migrations newer than every file of this release."""
    newest_known = max((f.version for f in files), default="")
    known = {f.version for f in files}
    return [row for row in applied if row.version not in known and row.version > newest_known]


def describe_ahead(rows: list[AppliedMigration]) -> str:
    return ", ".join(f"{row.version}_{row.name}" for row in rows)


def read_ledger(conn: psycopg.Connection[DictRow]) -> list[AppliedMigration]:
    if not one_row(conn.execute(query("ledger_exists")))["present"]:
        return []
    return [AppliedMigration(**row) for row in conn.execute(query("ledger_rows")).fetchall()]


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


def _check_target(target: str | None) -> None:
    if target is not None and not re.fullmatch(r"\d{14}", target):
        raise MigrationError(f"target must be a 14-digit migration version, got {target!r}")


def _up_to(pending: list[MigrationFile], target: str | None) -> list[MigrationFile]:
    _check_target(target)
    return pending if target is None else [f for f in pending if f.version <= target]


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


# CREATE/DROP INDEX CONCURRENTLY and REINDEX ... CONCURRENTLY take SHARE UPDATE EXCLUSIVE,
# which never blocks the queue's writers, and then wait for older transactions; the short
# lock_timeout (meant for locks that queue writers behind the migrator) would abort those
# waits and leave an INVALID index. The lock_timeout is set only inside transactional files.
CONCURRENT_INDEX = re.compile(
    r"^\s*(create\s+(unique\s+)?index|drop\s+index|reindex\s+(\(.*?\)\s*)?\w+)\s+"
    r"concurrently\b",
    re.IGNORECASE | re.DOTALL,
)
CREATE_INDEX = re.compile(
    r"^\s*create\s+(?:unique\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?"
    r"(?P<index>\"[^\"]+\"|[\w$]+)\s+on\s+(?:only\s+)?(?P<table>(?:(?:\"[^\"]+\"|[\w$]+)\.)?(?:\"[^\"]+\"|[\w$]+))",
    re.IGNORECASE | re.DOTALL,
)


def _code(statement: str) -> str:
    """The statement without its leading comment lines."""
    lines = statement.splitlines()
    while lines and (not lines[0].strip() or lines[0].strip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines)


def _index_validity(conn: psycopg.Connection[DictRow], statement: str) -> tuple[str, str, bool] | None:
    """(schema, index name, indisvalid) for a CREATE INDEX statement whose index exists."""
    match = CREATE_INDEX.match(_code(statement))
    if not match:
        return None
    index = match["index"][1:-1] if match["index"].startswith('"') else match["index"].lower()
    row = conn.execute(query("index_validity"), {"index": index, "table": match["table"]}).fetchone()
    return None if row is None else (row["schema"], index, row["valid"])


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


def split_statements(migration: MigrationFile) -> list[str]:
    """Statements of a no-transaction file: plain SQL, one statement per `;`-ended line."""
    if "$$" in migration.sql or re.search(r"\$\w+\$", migration.sql):
        raise MigrationError(
            f"{migration.path.name}: a no-transaction migration may not hold dollar-quoted bodies; "
            "put functions in a transactional migration"
        )
    statements, current = [], []
    for line in migration.sql.splitlines():
        current.append(line)
        if line.rstrip().endswith(";"):
            statements.append("\n".join(current))
            current = []
    if "\n".join(current).strip():
        statements.append("\n".join(current))
    return [s for s in statements if _has_code(s)]


def _has_code(statement: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in statement.splitlines())


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _brief(exc: psycopg.Error) -> str:
    diag = exc.diag
    where = f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else ""
    hint = ""
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        hint = f"; a lock was not granted within {LOCK_TIMEOUT} (a long transaction holds it): retry later"
    return f"{(diag.message_primary or str(exc)).strip()}{where}{hint}"
