"""What the commands share: the database URL option, a migrated pool, JSON output."""

from __future__ import annotations

import argparse
import json
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


def positive_int(value: str) -> int:
    """argparse type: reports a bad value as a usage error, not a traceback."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def add_database_url(parser) -> None:
    parser.add_argument("--database-url", metavar="URL", help="overrides DATABASE_URL")


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
def migrated_pool(settings: Settings) -> Iterator[ConnectionPool]:
    url = resolve_database_url(settings)
    require_migrated(url)
    pool = make_pool(url, settings, application_name="ingest")
    try:
        yield pool
    finally:
        pool.close()


def print_json(data) -> None:
    print(json.dumps(data, indent=2, default=str))
