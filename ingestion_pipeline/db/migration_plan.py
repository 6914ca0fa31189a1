"""The plan of a migration run: the files of `migrations/` (named `<14-digit version>_<name>.sql`,
each with its sha256), the ledger of applied ones, and the checks that refuse a run before
anything is applied (a changed or missing applied file, a new file older than the newest applied
one, a no-transaction file that cannot be split into statements), with the versions a database
has that are newer than this release (ahead). Read-only; db/migrate.py applies the plan."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import one_row
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.errors import MigrationError

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


def _check_target(target: str | None) -> None:
    if target is not None and not re.fullmatch(r"\d{14}", target):
        raise MigrationError(f"target must be a 14-digit migration version, got {target!r}")


def _up_to(pending: list[MigrationFile], target: str | None) -> list[MigrationFile]:
    _check_target(target)
    return pending if target is None else [f for f in pending if f.version <= target]


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
