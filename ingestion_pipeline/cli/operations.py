"""Operators' commands: `ingest db manifest`, `ingest db check-drift`, `ingest health`,
`ingest janitor`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import add_database_url, print_json
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db import drift
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect, resolve_database_url
from ingestion_pipeline.db.ready import require_migrated
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.health import IndexCheck, run_index_checks
from ingestion_pipeline.settings import Settings
from ingestion_pipeline.worker import janitor

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands

EXIT_DRIFTED = 1
EXIT_UNCHECKED = 2


def register_db(db_commands: Commands) -> None:
    manifest = db_commands.add_parser(
        "manifest", help="regenerate migrations/schema.sql and drift-manifest.json from a scratch replay"
    )
    manifest.add_argument("--check", action="store_true", help="exit 1 if the committed files are stale")
    manifest.set_defaults(handler=cmd_manifest)

    check = db_commands.add_parser("check-drift", help="compare a live database with the drift manifest")
    add_database_url(check)
    check.set_defaults(handler=cmd_check_drift)


def register(commands: Commands) -> None:
    health = commands.add_parser("health", help="queue and index checks after an apply; exit 1 if action needed")
    health.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(health)
    health.set_defaults(handler=cmd_health)

    sweep = commands.add_parser(
        "janitor",
        help="the janitor's passes without Dagster: expire stale final attempts, refresh stuck "
        "batches, clean abandoned generations",
    )
    sweep.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(sweep)
    sweep.set_defaults(handler=cmd_janitor)


def cmd_manifest(args: argparse.Namespace, settings: Settings) -> int:
    folder = migrator.default_migrations_dir()
    snapshot = drift.replay_snapshot(folder)
    targets = {folder / drift.SCHEMA_NAME: snapshot.schema_sql, folder / drift.MANIFEST_NAME: snapshot.manifest_json}
    stale = [path for path, text in targets.items() if not path.exists() or path.read_text("utf-8") != text]
    if args.check:
        for path in stale:
            print(f"stale: {path} (run `ingest db manifest`)")
        return EXIT_DRIFTED if stale else 0
    for path, text in targets.items():
        path.write_text(text, "utf-8")
    print(f"wrote {', '.join(str(p) for p in targets)}" if stale else "schema.sql and the manifest are up to date")
    return 0


def cmd_check_drift(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when clean, 1 when drifted, 2 when the check itself could not run."""
    try:
        expected = drift.load_manifest()
        url = resolve_database_url(settings)
        actual = drift.catalog_manifest(url)
        problems = drift.ledger_problems(url) + drift.differences(expected, actual)
    except IngestError as exc:
        print(f"ingest: error: could not check drift: {exc}", file=sys.stderr)
        return EXIT_UNCHECKED
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} difference(s) from the migrations", file=sys.stderr)
        return EXIT_DRIFTED
    print("no drift: the database matches the migrations")
    return 0


def cmd_health(args: argparse.Namespace, settings: Settings) -> int:
    """The index checks (the same ones Dagster runs on `document_index`); exit 1 if any
    fails, a warning (failed documents) aside: it is said, and the exit stays 0."""
    url = resolve_database_url(settings)
    with connect(url) as conn:
        health = IngestionRpc(conn, stale_after_seconds=settings.stale_after_seconds).queue_health()
    checks = run_index_checks(url, health, settings.max_pending_age_seconds, settings)
    problems = [check.message for check in checks if check.needs_action]
    warnings = [check.message for check in checks if check.warning and not check.passed]
    if args.json:
        print_json(
            {
                **health.model_dump(exclude={"fenced"}),
                "problems": problems,
                "warnings": warnings,
                "checks": [
                    {"name": c.name, "passed": c.passed, "warning": c.warning, "message": c.message} for c in checks
                ],
            }
        )
    else:
        jobs = ", ".join(f"{status} {count}" for status, count in sorted(health.jobs_by_status.items())) or "none"
        print(f"jobs: {jobs}; generations awaiting cleanup: {health.generations_awaiting_cleanup}")
        print(render_table(["check", "result", "detail"], [(c.name, _result(c), c.message) for c in checks]))
        for problem in problems:
            print(f"needs action: {problem}")
        for warning in warnings:
            print(f"warning: {warning}")
    return 1 if problems else 0


def _result(check: IndexCheck) -> str:
    if check.passed:
        return "ok"
    return "WARNING" if check.warning else "FAILED"


def cmd_janitor(args: argparse.Namespace, settings: Settings) -> int:
    """One janitor run (what the Dagster `janitor` job does), then exit 0."""
    url = resolve_database_url(settings)
    require_migrated(url)
    with connect(url) as conn:
        done = janitor.run_janitor(
            IngestionRpc(conn, stale_after_seconds=settings.stale_after_seconds),
            batch_size=settings.cleanup_batch_size,
            time_budget_seconds=settings.janitor_time_budget_seconds,
            keep_versions=settings.keep_versions,
        )
    if args.json:
        print_json(done)
        return 0
    cleanup = done["cleanup"]
    print(
        render_table(
            ["step", "result"],
            [
                ("expired stale final attempts", done["expired"]),
                ("refreshed stuck batches", done["refreshed_batches"]),
                ("recounted batches whose counters drifted", done["drifted_batches"]),
                (
                    "cleaned generations",
                    f"{cleanup['generations']} in {cleanup['passes']} pass(es) "
                    f"({cleanup['chunks']} chunks, {cleanup['pages']} pages, "
                    f"{cleanup['sections']} sections; bytes of {cleanup['sources']} deleted "
                    f"document(s))",
                ),
                (
                    "removed older versions' kept bytes",
                    f"{done['kept_bytes']['versions']} version(s), {done['kept_bytes']['bytes']} bytes "
                    f"(INGEST_KEEP_VERSIONS={settings.keep_versions})",
                ),
                (
                    "folded search term counts",
                    f"{done['search_terms']['removed']} row(s) into {done['search_terms']['written']} "
                    f"in {done['search_terms']['passes']} pass(es)",
                ),
            ],
        )
    )
    return 0
