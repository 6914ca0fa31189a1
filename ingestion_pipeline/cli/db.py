"""`ingest db …`: the embedded server and the migrations."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ingestion_pipeline.cli import operations
from ingestion_pipeline.cli.common import add_database_url
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db import embedded, vector_index
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import (
    connect,
    direct_database_url,
    embedded_folder,
    mention_legacy_data_dir,
    one_row,
    redact,
    resolve_database_url,
    start_embedded,
)
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    db = commands.add_parser("db", help="the database: embedded server and migrations")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    db_commands.add_parser("start", help="start (or reuse) the embedded server and print its URL").set_defaults(
        handler=cmd_db_start
    )
    db_commands.add_parser("stop", help="stop the embedded server").set_defaults(handler=cmd_db_stop)
    url = db_commands.add_parser("url", help="print the database URL (starts the embedded server if needed)")
    url.set_defaults(handler=cmd_db_url)
    status = db_commands.add_parser("status", help="where the database is and which migrations are applied")
    status.set_defaults(handler=cmd_db_status)
    migrate = db_commands.add_parser("migrate", help="apply pending migrations")
    migrate.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    migrate.add_argument("--target", metavar="VERSION", help="stop after this 14-digit version")
    migrate.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="list each migration applied"
    )
    migrate.set_defaults(handler=cmd_db_migrate)
    for sub in (status, migrate, url):
        add_database_url(sub)
    operations.register_db(db_commands)


def cmd_db_start(args: argparse.Namespace, settings: Settings) -> int:
    if settings.database_url:
        print(f"DATABASE_URL is set ({redact(settings.database_url)}); the embedded server is not used.")
        return 0
    print(start_embedded(settings))
    return 0


def cmd_db_stop(args: argparse.Namespace, settings: Settings) -> int:
    mention_legacy_data_dir(settings)
    folder = embedded_folder(settings)
    stopped = embedded.stop(folder)
    print(f"stopped the embedded PostgreSQL in {folder}" if stopped else f"not running ({folder})")
    return 0


def cmd_db_url(args: argparse.Namespace, settings: Settings) -> int:
    print(resolve_database_url(settings))
    return 0


def cmd_db_status(args: argparse.Namespace, settings: Settings) -> int:
    if settings.database_url:
        url = settings.database_url
        print(f"database: {redact(url)} (DATABASE_URL or --database-url)")
    else:
        mention_legacy_data_dir(settings)
        folder = embedded_folder(settings)
        where = f"the embedded server in {folder} ({_why_this_folder(settings)})"
        state = embedded.status(folder)
        if not state.running or state.uri is None:  # a running server has its URI
            print(f"database: {where}: not running (start it: ingest db start)")
            return 0
        url = state.uri
        print(f"database: {redact(url)}, {where}: running, pid {state.pid}")
    with connect(url) as conn:
        server = one_row(conn.execute(query("server_version")))
    print(f"server: PostgreSQL {server['version']}, database {server['database']}")
    _print_plan(migrator.plan(url))
    print(_vector_search_line(url))
    return 0


def _why_this_folder(settings: Settings) -> str:
    if settings.data_dir_is_default:
        return "the per-user default, shared by every folder"
    return "INGEST_DATA_DIR"


def cmd_db_migrate(args: argparse.Namespace, settings: Settings) -> int:
    url = direct_database_url(settings)
    if args.dry_run:
        plan = migrator.plan(url, target=args.target)
        _print_plan(plan)
        print("dry run: nothing was changed")
        return 0

    def report(migration: migrator.MigrationFile, duration_ms: int) -> None:
        print(f"applied {migration.path.name} ({duration_ms} ms)")

    listed = getattr(args, "verbose", False)  # `ingest db migrate -v` or `ingest -v db migrate`
    plan = migrator.migrate(url, target=args.target, on_apply=report if listed else None)
    applied = len(plan.newly_applied)
    hint = "" if listed or not applied else " (-v lists them)"
    print(f"{applied} migration(s) applied{hint}" if applied else "database is up to date")
    print(ensure_vector_index(url, settings))
    if plan.ahead:
        print(
            f"ingest: warning: the database is ahead of this release ({migrator.describe_ahead(plan.ahead)} "
            "applied by a newer release); nothing of this release was left to apply",
            file=sys.stderr,
        )
    return 0


def _print_plan(plan: migrator.Plan) -> None:
    ahead = {m.version for m in plan.ahead}
    rows = [
        (
            m.version,
            m.name,
            "applied (newer release)" if m.version in ahead else "applied",
            m.applied_at.strftime("%Y-%m-%d %H:%M:%S"),
            m.checksum[:12],
        )
        for m in plan.applied
    ]
    rows += [(m.version, m.name, "pending", "", m.checksum[:12]) for m in plan.pending]
    print(render_table(["version", "name", "state", "applied at", "sha256"], rows))
    newer = f", {len(plan.ahead)} applied by a newer release" if plan.ahead else ""
    print(f"{len(plan.applied)} applied, {len(plan.pending)} pending{newer}")


def ensure_vector_index(url: str, settings: Settings) -> str:
    """pgvector indexes one dimension: the configured embedder's (docs/vector-search.md).
    `ingest db migrate`, `ingest ui` and `ingest demo` build it after migrating."""
    dimensions = embedder_from_settings(settings).dimensions
    if dimensions is None:
        return f"vector index: none (INGEST_EMBEDDER={settings.embedder} gives no vector dimension)"
    return vector_index.ensure_hnsw_index(url, dimensions)


def _vector_search_line(url: str) -> str:
    with connect(url) as conn:
        column = vector_index.vector_column(conn)
        if column is None:
            return "vector search: exact (cosine in SQL over real[]; no pgvector column)"
        indexes = [f"{row['name']}{'' if row['valid'] else ' (INVALID)'}" for row in vector_index.hnsw_indexes(conn)]
    shown = ", ".join(indexes) or "none (`ingest db migrate` builds one for the embedder's dimension)"
    return f"vector search: pgvector {column.version} in schema {column.schema}; HNSW indexes: {shown}"
