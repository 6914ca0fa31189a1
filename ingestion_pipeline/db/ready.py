"""A database ready for this release: every migration applied, then a pool on it.

Shared by the commands and the Dagster resources (both sit above this layer)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import (
    connect,
    make_pool,
    name_database,
    one_row,
    resolve_database_url,
    through_pooler,
)
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)


def require_migrated(url: str, folder: Path | None = None) -> None:
    """Refuses a database missing a migration of this release (or with a changed one). A
    database ahead of this release (every file it knows applied unchanged, plus newer ones
    a newer release applied) is accepted with a warning: expand/contract rollouts migrate
    first and redeploy workers after, and newer migrations keep older calls working."""
    plan = migrator.plan(url, folder)  # also refuses changed or missing migration files
    pending = plan.pending
    if pending:
        raise IngestError(
            f"the database {name_database(url)} has {len(pending)} pending migration(s), starting with "
            f"{pending[0].path.name}: run `ingest db migrate`"
        )
    if plan.ahead:
        log.warning(
            "the database is ahead of this release: it has %d newer migration(s) this release does "
            "not know (%s); every migration this release knows is applied unchanged, so it runs",
            len(plan.ahead),
            migrator.describe_ahead(plan.ahead),
        )


@contextmanager
def migrated_pool(
    settings: Settings, application_name: str = "ingest"
) -> Iterator[ConnectionPool[psycopg.Connection[DictRow]]]:
    pool = open_migrated_pool(resolve_database_url(settings), settings, application_name)
    try:
        yield pool
    finally:
        pool.close()


@contextmanager
def migrated_connection(settings: Settings, application_name: str = "ingest") -> Iterator[psycopg.Connection[DictRow]]:
    """One connection, as a pool of `migrated_pool` would lend it (autocommit, rows as dicts,
    the settings' prepare threshold and connect timeout), once the database has every
    migration: for a command that runs a few statements and exits (`ingest search`), without
    the pool's threads and the connections it opens."""
    url = resolve_database_url(settings)
    require_migrated(url)
    with connect(
        url,
        timeout=settings.connect_timeout_seconds,
        prepare_threshold=settings.prepare_threshold,
        application_name=application_name,
    ) as conn:
        yield conn


def open_migrated_pool(
    url: str, settings: Settings, application_name: str = "ingest"
) -> ConnectionPool[psycopg.Connection[DictRow]]:
    """A pool on `url` once it has every migration and the connections the pool may open;
    the caller closes it."""
    require_migrated(url)
    require_connections(url, settings.resolved_pool_max_size)
    return make_pool(url, settings, application_name=application_name)


def require_connections(url: str, needed: int) -> None:
    """Refuses to start a pool that may need more connections than the server has free.
    Behind a pooler the server's slots are the pooler's to share (its pool size bounds
    them), so nothing is checked there."""
    with connect(url) as conn:
        if through_pooler(conn):
            log.info("connected through a pooler: the connection budget is the pooler's")
            return
        budget = one_row(conn.execute(query("connection_budget")))
    free = budget["max_connections"] - budget["reserved"] - budget["in_use"] + 1  # +1: this check's own
    if needed > free:
        raise IngestError(
            f"not enough database connections: this process may open {needed} (INGEST_POOL_MAX_SIZE) but the "
            f"server has {max(free, 0)} free (max_connections {budget['max_connections']}, {budget['reserved']} "
            f"reserved, {budget['in_use'] - 1} in use): lower INGEST_POOL_MAX_SIZE, run fewer workers, raise "
            "max_connections, or connect through a pooler"
        )
