"""A database ready for this release: every migration applied, then a pool on it.

Shared by the commands and the Dagster resources (both sit above this layer)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psycopg_pool import ConnectionPool

from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import make_pool, resolve_database_url
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.settings import Settings

log = logging.getLogger(__name__)


def require_migrated(url: str, folder: Path | None = None) -> None:
    """Refuses a database missing a migration of this release (or with a changed one). A
    database ahead of this release (every file it knows applied unchanged, plus newer ones
    a newer release applied) is accepted with a warning: expand/contract rollouts migrate
    first and redeploy workers after, and newer migrations keep older calls working."""
    plan = migrator.plan(url, folder)  # also refuses changed or missing migration files
    pending = plan.pending
    if pending:
        raise IngestError(f"the database has {len(pending)} pending migration(s), starting with "
                          f"{pending[0].path.name}: run `ingest db migrate`")
    if plan.ahead:
        log.warning("the database is ahead of this release: it has %d newer migration(s) this release does "
                    "not know (%s); every migration this release knows is applied unchanged, so it runs",
                    len(plan.ahead), migrator.describe_ahead(plan.ahead))


@contextmanager
def migrated_pool(settings: Settings, application_name: str = "ingest") -> Iterator[ConnectionPool]:
    url = resolve_database_url(settings)
    require_migrated(url)
    pool = make_pool(url, settings, application_name=application_name)
    try:
        yield pool
    finally:
        pool.close()
