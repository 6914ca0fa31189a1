"""Dagster's own storage (runs, event logs, schedules) in PostgreSQL, found the way `ingest`
finds its database, so that plain `dagster dev` works with nothing set.

The checkout's dagster.yaml names `PipelineDagsterStorage`. Its database is, in order:
- `DAGSTER_PG_URL`, written any way a user writes it (`postgresql://`, `postgres://`,
  `postgresql+psycopg2://`, or libpq's key=value form);
- otherwise a `dagster` database on the pipeline's server, created on first use:
  INGEST_DIRECT_DATABASE_URL's, else DATABASE_URL's, else the embedded server under
  INGEST_DATA_DIR (started if needed).
Dagster's storage sets session parameters (statement_timeout) on its connections, which a
transaction-mode pooler would hand on to other clients: through a pooler it is refused.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import psycopg
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager
from dagster_postgres import DagsterPostgresStorage
from psycopg import sql

from ingestion_pipeline.db.connection import connect, direct_database_url, through_pooler
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.orchestration.home import dagster_home
from ingestion_pipeline.settings import load_settings

if TYPE_CHECKING:
    from dagster._config import UserConfigSchema
    from dagster._serdes import ConfigurableClassData

DAGSTER_DATABASE = "dagster"
# dagster-postgres is built on psycopg2; SQLAlchemy 2.1 picks psycopg 3 for a plain
# postgresql:// URL, and Dagster's storage then fails with "the connection is closed".
SCHEME = "postgresql+psycopg2"
_DRIVER_PREFIX = re.compile(r"^postgres(?:ql)?(?:\+\w+)?://", re.IGNORECASE)
_resolved: dict[tuple[str | None, ...], str] = {}


class PipelineDagsterStorage(DagsterPostgresStorage):
    """dagster-postgres's storage with the URL resolved at load time (no config needed)."""

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return {}

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> PipelineDagsterStorage:
        return cls(postgres_url=dagster_storage_url(), inst_data=inst_data)


class PipelineComputeLogManager(LocalComputeLogManager):
    """Dagster's local step-log files, kept under the pipeline's data folder."""

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return {}

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> PipelineComputeLogManager:
        return cls(base_dir=str(compute_log_dir()), inst_data=inst_data)


def compute_log_dir() -> Path:
    return dagster_home(load_settings().data_dir) / "compute_logs"


def dagster_storage_url() -> str:
    """The SQLAlchemy URL of Dagster's storage. Resolved once per process and environment:
    Dagster builds the storage several times while it loads an instance."""
    key = tuple(
        os.environ.get(name)
        for name in ("DAGSTER_PG_URL", "INGEST_DIRECT_DATABASE_URL", "DATABASE_URL", "INGEST_DATA_DIR")
    )
    if key not in _resolved:
        _resolved[key] = _resolve_storage_url()
    return _resolved[key]


def _resolve_storage_url() -> str:
    given = os.environ.get("DAGSTER_PG_URL", "").strip()
    if given:
        return normalise_url(given)
    pipeline_url = direct_database_url(load_settings())
    with connect(pipeline_url) as conn:
        if through_pooler(conn):
            raise IngestError(
                "Dagster's storage needs a direct connection (it sets session parameters, which a "
                "transaction-mode pooler would pass on to other clients): set INGEST_DIRECT_DATABASE_URL to "
                "the server's direct URL (Supabase: the direct connection string), or DAGSTER_PG_URL"
            )
        exists = conn.execute("select 1 from pg_database where datname = %s", (DAGSTER_DATABASE,)).fetchone()
        if not exists:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # another Dagster process created it first
                conn.execute(sql.SQL("create database {}").format(sql.Identifier(DAGSTER_DATABASE)))
    return sqlalchemy_url(pipeline_url, DAGSTER_DATABASE)


def normalise_url(url: str) -> str:
    """Any PostgreSQL URL a user writes, as the psycopg2 SQLAlchemy URL Dagster needs."""
    libpq_url = _DRIVER_PREFIX.sub("postgresql://", url)
    dbname = str(psycopg.conninfo.conninfo_to_dict(libpq_url).get("dbname") or "postgres")
    return sqlalchemy_url(libpq_url, dbname)


def sqlalchemy_url(url: str, dbname: str) -> str:
    """dagster-postgres hands the URL to SQLAlchemy, which wants URL form (not key=value)
    naming the psycopg2 driver. Every connection option of `url` is kept (as a query
    parameter: sslmode, sslrootcert, options, ...; psycopg2 passes them on to libpq). A
    single TCP host goes in the netloc (an IPv6 address in brackets); a Unix-socket folder
    or a multi-host list goes into the query string with its port(s), where libpq reads it."""
    # libpq's options are strings (psycopg types them str | int: its own keyword arguments)
    parts = {key: str(value) for key, value in psycopg.conninfo.conninfo_to_dict(url).items()}
    parts.pop("dbname", None)
    user = quote(parts.pop("user", "") or "postgres", safe="")
    password = parts.pop("password", "")
    password = f":{quote(password, safe='')}" if password else ""
    host = parts.get("host") or ""
    netloc = ""
    if host and not host.startswith("/") and "," not in host and "," not in (parts.get("port") or ""):
        parts.pop("host")
        port = parts.pop("port", None)
        netloc = (f"[{host}]" if ":" in host else quote(host, safe=".-_~")) + (f":{port}" if port else "")
    query = urlencode(parts, quote_via=quote, safe="")
    return f"{SCHEME}://{user}{password}@{netloc}/{quote(dbname, safe='')}" + (f"?{query}" if query else "")
