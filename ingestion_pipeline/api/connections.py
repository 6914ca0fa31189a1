"""What `Index.open` is given, made into what the operations run on.

A URL, or nothing (the database `ingest` would use: settings.py's precedence, the per-user
embedded server last, reused when it runs), becomes a pool of the index's own, closed with
it. A caller's connection or pool is used as it is: its row factory stays the caller's
(every read below names its own, db/connection.execute_as_dicts), and on a connection not
in autocommit mode each call of the index is one transaction (`unit_of_work`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool, PoolTimeout

from ingestion_pipeline.db.connection import Database, redact, resolve_database_url
from ingestion_pipeline.db.ready import open_migrated_pool
from ingestion_pipeline.errors import DatabaseUnavailable, IngestError, first_line
from ingestion_pipeline.settings import Settings

# What `Index.open` takes: a URL, a psycopg connection or pool, or nothing.
DatabaseArgument = str | psycopg.Connection[Any] | ConnectionPool[Any] | None

APPLICATION_NAME = "ingest-python"


@dataclass(frozen=True)
class Opened:
    db: Database  # what the calls run on
    url: str  # the database's address, for the pool a worker opens and for messages
    own_pool: ConnectionPool[psycopg.Connection[DictRow]] | None  # opened here: closed with the index


def open_database(database: DatabaseArgument, settings: Settings) -> Opened:
    """The database `database` names (None: as `ingest` resolves it from `settings`)."""
    if isinstance(database, psycopg.Connection):
        return Opened(database, conninfo_of(database), None)
    if isinstance(database, ConnectionPool):
        with one_line_errors(), database.connection() as conn:
            return Opened(database, conninfo_of(conn), None)
    if database is not None and not isinstance(database, str):
        raise TypeError(
            f"Index.open takes a URL, a psycopg connection or a psycopg_pool.ConnectionPool, not {type(database)!r}"
        )
    url = database or resolve_database_url(settings)
    pool = open_migrated_pool(url, settings, APPLICATION_NAME)
    return Opened(pool, url, pool)


def conninfo_of(conn: psycopg.Connection[Any]) -> str:
    """The connection string of `conn`'s database, its password included (libpq's `dsn`
    leaves it out), so that a worker can open connections of its own there."""
    if conn.closed:
        raise DatabaseUnavailable("the connection given is closed")
    password = conn.info.password
    return psycopg.conninfo.make_conninfo(conn.info.dsn, password=password) if password else conn.info.dsn


@contextmanager
def unit_of_work(db: Database) -> Iterator[Database]:
    """`db` for one call of the index. A connection not in autocommit mode gets a
    transaction around the call, committed at its end, or a savepoint when the caller has a
    transaction open (it commits with the caller's): otherwise the call's writes would wait,
    unseen, in a transaction psycopg opened implicitly."""
    if isinstance(db, psycopg.Connection) and not db.autocommit:
        with db.transaction():
            yield db
    else:
        yield db


@contextmanager
def one_line_errors() -> Iterator[None]:
    """A database that went away, or a pool that has no connection to give, as one line."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"database unavailable: {first_line(exc)}") from exc
    except PoolTimeout as exc:
        raise DatabaseUnavailable(f"no connection from the pool: {first_line(exc)}") from exc


def in_callers_transaction(db: Database) -> bool:
    """True when `db` is a connection on which the caller holds a transaction open."""
    if not isinstance(db, psycopg.Connection):
        return False
    return db.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


def refuse_reader_in_transaction(db: Database) -> None:
    """Searching as an app's reader sets the role for the rest of the transaction it runs
    in: inside the caller's own transaction the caller would go on as that role."""
    if in_callers_transaction(db):
        raise IngestError(
            "searching as an app reader needs a connection outside a transaction (its role would stay set "
            "for the rest of yours): commit or roll back first, or open the index with a URL or a pool"
        )


def describe(opened: Opened) -> str:
    return redact(opened.url)
