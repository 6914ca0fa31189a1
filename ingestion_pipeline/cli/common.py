"""What the commands share: the database URL option, a migrated pool, JSON output."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg_pool import ConnectionPool

from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import make_pool, resolve_database_url
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.settings import Settings


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


def require_migrated(url: str) -> None:
    pending = migrator.plan(url).pending  # also refuses changed or missing migration files
    if pending:
        raise IngestError(f"the database has {len(pending)} pending migration(s), starting with "
                          f"{pending[0].path.name}: run `ingest db migrate`")


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
