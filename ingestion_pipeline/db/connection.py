"""Where the database is, and how to reach it with a clear error when it is not there."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, LiteralString, TypeAlias, TypeVar, cast

import psycopg
from psycopg.abc import Params
from psycopg.rows import DictRow, dict_row

from ingestion_pipeline.db import embedded
from ingestion_pipeline.errors import DatabaseUnavailable
from ingestion_pipeline.settings import Settings, legacy_data_dir

if TYPE_CHECKING:
    # psycopg_pool is imported where a pool is made (`make_pool`): a command on one
    # connection (`ingest search`) does without it.
    from psycopg_pool import ConnectionPool

# The embedded servers this process started or reused, by URI: their data folder, so that a
# message about one of them names the folder (its socket URL alone says little).
_EMBEDDED_FOLDERS: dict[str, Path] = {}
_HINTED: set[Path] = set()  # per-folder databases of earlier releases this process mentioned


def resolve_database_url(settings: Settings) -> str:
    """DATABASE_URL (or --database-url) when set, otherwise the embedded server in
    INGEST_DATA_DIR, by default the user's data folder (started if needed)."""
    if settings.database_url:
        return settings.database_url
    return start_embedded(settings)


def start_embedded(settings: Settings) -> str:
    """The embedded server's URI, started if needed: one line on stderr says so, and where."""
    folder = embedded_folder(settings)
    mention_legacy_data_dir(settings)

    def announce(uri: str) -> None:
        print(f"ingest: started the embedded PostgreSQL in {folder} ({uri})", file=sys.stderr, flush=True)

    uri = embedded.start(folder, on_start=announce)
    _EMBEDDED_FOLDERS[uri] = folder
    return uri


def embedded_folder(settings: Settings) -> Path:
    return settings.data_dir.expanduser().resolve()


def mention_legacy_data_dir(settings: Settings) -> None:
    """Releases before the per-user default kept an embedded server per folder, in the
    nearest `.ingest`. One found here is left alone, neither used nor deleted: say so once,
    one line on stderr, and how to keep using it (INGEST_DATA_DIR, which also silences this)."""
    legacy = legacy_data_dir() if settings.data_dir_is_default else None
    if legacy is None or legacy.resolve() == embedded_folder(settings) or legacy in _HINTED:
        return
    _HINTED.add(legacy)
    running = ", its server still running" if embedded.status(legacy).running else ""
    print(
        f"ingest: note: not using {legacy} (a per-folder database of an earlier release{running}); every folder "
        f"now shares {embedded_folder(settings)}. INGEST_DATA_DIR={legacy} keeps using the old one",
        file=sys.stderr,
        flush=True,
    )


def name_database(url: str) -> str:
    """A database for a message: the URL without its password or, for an embedded server
    this process started or reused, the database and the server's folder."""
    folder = _EMBEDDED_FOLDERS.get(url)
    if folder is None:
        return redact(url)
    dbname = psycopg.conninfo.conninfo_to_dict(url).get("dbname")
    return f"{dbname!r} of the embedded server in {folder}"


def direct_database_url(settings: Settings) -> str:
    """For what is better without a pooler in between (migrations, Dagster's own storage):
    INGEST_DIRECT_DATABASE_URL when set, otherwise the usual URL."""
    return settings.direct_database_url or resolve_database_url(settings)


def through_pooler(conn: psycopg.Connection[Any]) -> bool:
    """True when a pooler or proxy sits between us and the server. PgBouncer (and poolers
    like it) answer the connection's startup themselves, with a backend key of their own:
    the pid the connection was given is not the pid of the server process running our
    statements."""
    pid: int = one_row(execute_as_dicts(conn, "select pg_backend_pid() as pid"))["pid"]
    return pid != conn.info.backend_pid


R = TypeVar("R")


def one_row(cursor: psycopg.Cursor[R]) -> R:
    """The row of a statement that always returns one (an aggregate, a function call)."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("a statement that always returns a row returned none")
    return row


# Where the operations run: a pool, from which each call borrows a connection, or one
# connection, which the caller may hold a transaction open on (the race tests do).
Database: TypeAlias = "psycopg.Connection[Any] | ConnectionPool[Any]"


@contextmanager
def borrow(db: Database) -> Iterator[psycopg.Connection[Any]]:
    """A connection of `db`: the pool's for the block (committed at its end, as the pool
    does), or the connection itself."""
    pools = sys.modules.get("psycopg_pool")  # not imported: no pool was made, `db` is a connection
    if pools is not None and isinstance(db, pools.ConnectionPool):
        with db.connection() as conn:
            yield conn
    else:
        yield cast("psycopg.Connection[Any]", db)


def execute_as_dicts(
    conn: psycopg.Connection[Any], statement: LiteralString, params: Params | None = None
) -> psycopg.Cursor[DictRow]:
    """Run `statement` on a cursor whose rows are dicts, whatever `conn`'s row factory: the
    code reads columns by name, and a caller's own connection (psycopg.connect()'s rows are
    tuples, through the Python API) must work as it is, its row factory left alone."""
    return conn.cursor(row_factory=dict_row).execute(statement, params)


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<unparseable URL>"
    parts.pop("password", None)
    host = parts.get("host") or "localhost"
    where = f"{host}:{parts['port']}" if parts.get("port") else host
    return f"{parts.get('user', '')}@{where}/{parts.get('dbname', '')}"


# psycopg prepares a statement on the server after it ran five times. Behind a
# transaction-mode pooler (PgBouncer, Supabase's pooler) the next transaction may run on
# another server connection, where that statement's name is unknown or names another
# statement: so nothing is prepared unless a setting asks for it (INGEST_PREPARE_THRESHOLD,
# for direct connections).
NO_PREPARED_STATEMENTS = None


def connect(
    url: str,
    *,
    autocommit: bool = True,
    timeout: int = 10,
    prepare_threshold: int | None = NO_PREPARED_STATEMENTS,
    **kwargs: Any,
) -> psycopg.Connection[DictRow]:
    """Open one connection, turning failures into a one-line DatabaseUnavailable."""
    try:
        return psycopg.connect(
            url,
            autocommit=autocommit,
            connect_timeout=timeout,
            row_factory=dict_row,
            prepare_threshold=prepare_threshold,
            **kwargs,
        )
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot connect to {name_database(url)}: {_cause(exc)}") from None
    except psycopg.ProgrammingError as exc:
        raise DatabaseUnavailable(f"bad database URL: {str(exc).strip().splitlines()[0]}") from None


def _cause(exc: psycopg.OperationalError) -> str:
    """libpq's first line names the cause ('... failed: Connection refused'); the rest
    are hints. Keep the part after the last 'failed:' when there is one."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return "connection failed"
    return lines[0].rsplit("failed: ", 1)[-1]


def make_pool(url: str, settings: Settings, **kwargs: Any) -> ConnectionPool[psycopg.Connection[DictRow]]:
    """A psycopg pool sized from settings; opened and checked before it is returned."""
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[psycopg.Connection[DictRow]] = ConnectionPool(
        url,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        kwargs={
            "autocommit": True,
            "row_factory": dict_row,
            "prepare_threshold": settings.prepare_threshold,
            "connect_timeout": settings.connect_timeout_seconds,
            **kwargs,
        },
        # How long a caller waits for a connection: a database that went away surfaces
        # as an error within the connect timeout, not after psycopg_pool's 30 s default.
        timeout=settings.connect_timeout_seconds,
        # A connection the server dropped while it sat idle in the pool (restart, failover,
        # idle_session_timeout, pg_terminate_backend) is found dead by a cheap round trip
        # before it is handed out, and replaced; without this the next claim or job gets it.
        check=_check_connection,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=settings.connect_timeout_seconds)
    except Exception as exc:  # noqa: BLE001 - PoolTimeout hides the libpq reason; say where we tried
        pool.close()
        raise DatabaseUnavailable(f"cannot open a connection pool to {name_database(url)}: {exc}") from None
    return pool


def _check_connection(conn: psycopg.Connection[DictRow]) -> None:
    """The pool's check before it hands out an idle connection. One dead idle connection
    usually means the server dropped all of them; psycopg_pool would find the others one
    at a time with a growing back-off between them (1 + 2 + 4 + … s, past the pool
    timeout with ten dead connections), so check the rest of the idle ones at once: the
    dead ones are replaced in the background and the caller gets a fresh one."""
    from psycopg_pool import ConnectionPool

    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        pool = getattr(conn, "_pool", None)  # psycopg_pool sets it before the check
        if isinstance(pool, ConnectionPool) and not pool.closed:
            pool.check()
        raise
