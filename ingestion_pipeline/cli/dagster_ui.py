"""`ingest ui` (Dagster webserver + daemon) and `ingest demo` (the whole loop, in process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from urllib.parse import quote, urlencode

import psycopg
from psycopg import sql

from ingestion_pipeline.cli import documents
from ingestion_pipeline.cli.common import add_database_url, migrated_pool
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect, resolve_database_url
from ingestion_pipeline.enqueue import enqueue_paths
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.settings import Settings

DAGSTER_DATABASE = "dagster"
# dagster-postgres is built on psycopg2; SQLAlchemy 2.1 would pick psycopg 3 for a plain
# postgresql:// URL, and Dagster's storage then fails with "the connection is closed".
SCHEME = "postgresql+psycopg2"


def register(commands) -> None:
    ui = commands.add_parser("ui", help="run the Dagster UI and daemon (dagster dev) on this pipeline")
    ui.add_argument("--port", type=int, default=3000, help="webserver port (default 3000)")
    ui.add_argument("--host", default="127.0.0.1", help="webserver host (default 127.0.0.1)")
    add_database_url(ui)
    ui.set_defaults(handler=cmd_ui)

    demo = commands.add_parser("demo", help="migrate, enqueue the samples, drain with Dagster, status, search")
    demo.add_argument("--samples", default="samples", help="folder of documents (default ./samples)")
    add_database_url(demo)
    demo.set_defaults(handler=cmd_demo)


def checkout_root() -> Path:
    root = Path.cwd()
    if not (root / "workspace.yaml").exists() or not (root / "dagster.yaml").exists():
        raise IngestError("run `ingest ui` from the project folder (it needs workspace.yaml and dagster.yaml)")
    return root


def dagster_storage_url(settings: Settings, pipeline_url: str) -> str:
    """Dagster's runs and events live in their own database on the same server."""
    if os.environ.get("DAGSTER_PG_URL"):
        return os.environ["DAGSTER_PG_URL"]
    with connect(pipeline_url) as conn:
        exists = conn.execute("select 1 from pg_database where datname = %s", (DAGSTER_DATABASE,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(DAGSTER_DATABASE)))
    return sqlalchemy_url(pipeline_url, DAGSTER_DATABASE)


def sqlalchemy_url(url: str, dbname: str) -> str:
    """dagster-postgres hands the URL to SQLAlchemy, which wants URL form (not key=value)
    naming the psycopg2 driver. Every connection option of `url` is kept (as a query
    parameter: sslmode, sslrootcert, options, ...; psycopg2 passes them on to libpq). A
    single TCP host goes in the netloc (an IPv6 address in brackets); a Unix-socket folder
    or a multi-host list goes into the query string with its port(s), where libpq reads it."""
    parts = psycopg.conninfo.conninfo_to_dict(url)
    parts.pop("dbname", None)
    user = quote(parts.pop("user", None) or "postgres", safe="")
    password = parts.pop("password", None)
    password = f":{quote(password, safe='')}" if password else ""
    host = parts.get("host") or ""
    netloc = ""
    if host and not host.startswith("/") and "," not in host and "," not in (parts.get("port") or ""):
        parts.pop("host")
        port = parts.pop("port", None)
        netloc = (f"[{host}]" if ":" in host else quote(host, safe=".-_~")) + (f":{port}" if port else "")
    query = urlencode(parts, quote_via=quote, safe="")
    return f"{SCHEME}://{user}{password}@{netloc}/{quote(dbname, safe='')}" + (f"?{query}" if query else "")


def prepare_dagster_home(settings: Settings, root: Path) -> Path:
    home = (settings.data_dir / "dagster").resolve()
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "dagster.yaml", home / "dagster.yaml")
    return home


def cmd_ui(args, settings: Settings) -> int:
    root = checkout_root()
    url = resolve_database_url(settings)
    migrator.migrate(url)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(prepare_dagster_home(settings, root)),
        "DAGSTER_PG_URL": dagster_storage_url(settings, url),
        "INGEST_DATA_DIR": str(settings.data_dir.resolve()),
    }
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
    dagster = Path(sys.executable).parent / "dagster"
    command = [str(dagster), "dev", "-w", str(root / "workspace.yaml"), "-h", args.host, "-p", str(args.port)]
    print(f"Dagster UI on http://{args.host}:{args.port} (Ctrl-C stops it)", flush=True)
    return subprocess.call(command, env=env, cwd=root)


def cmd_demo(args, settings: Settings) -> int:
    import dagster as dg

    from ingestion_pipeline.orchestration.jobs import ingest_documents
    from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource

    url = resolve_database_url(settings)
    settings = settings.model_copy(update={"database_url": url})
    for migration in migrator.migrate(url).newly_applied:
        print(f"applied {migration.path.name}")
    with migrated_pool(settings) as pool:
        report = enqueue_paths(pool, [args.samples], max_bytes=settings.max_file_bytes, batch_name="demo samples")
    print(f"enqueued {len(report.files)} file(s) into batch {report.batch_id}: {report.counts}")

    with dg.DagsterInstance.ephemeral() as instance:
        result = ingest_documents.execute_in_process(instance=instance, resources={
            "database": DatabaseResource(database_url=url),
            "processing": ProcessingResource(embedder=settings.embedder)})
    if not result.success:
        raise IngestError("the ingest_documents run failed; see the log above")
    print(f"ingest_documents run {result.run_id[:8]}: {result.output_for_node('drain_queue')}\n")
    documents.print_status(settings, batch_id=report.batch_id)
    print()
    documents.print_search(settings, "lease fencing", limit=3)
    return 0
