"""`ingest demo` (what `make demo` runs): the whole loop in process, on a page of output a
person reads. Migrations are one line (`-v` lists them); the drain run's materialization of
`document_index` is two short columns, the index and this run, with its time as a time;
the Markdown tables Dagster shows (the formats, the run's failures) become plain tables."""

from __future__ import annotations

import argparse
import logging
import os
import re
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestion_pipeline.cli import search
from ingestion_pipeline.cli.common import add_database_url
from ingestion_pipeline.cli.dagster_ui import checkout_root, dagster_environment
from ingestion_pipeline.cli.db import ensure_vector_index
from ingestion_pipeline.cli.documents import unqueued
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import direct_database_url, resolve_database_url
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.home import write_home
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands

PARAPHRASE = "playful animals near streams"  # samples/river-otters.html has none of these words

# The materialization's keys, as the UI names them, in the two columns: what the index holds,
# what this run did. Left out here (the UI has them): the drain mark's count and the worker's id.
INDEX_KEYS = ("documents", "chunks", "collections", "sources", "failed_jobs", "last_job_finished_at")
RUN_KEYS = (
    "run_claimed",
    "run_indexed",
    "run_failed",
    "run_chunks",
    "run_batches_touched",
    "docs_per_second",
    "seconds",
)
SHOWN_WHEN_NOT_ZERO = ("run_retried", "run_lease_lost", "run_abandoned")
TABLES = {"formats": "", "run_failures": "failed in this run:"}  # Markdown tables, and the line above each


class Markdown(str):
    """A Markdown metadata value (a table, and perhaps a note under it)."""


def register(commands: Commands) -> None:
    demo = commands.add_parser("demo", help="migrate, enqueue the samples, drain with Dagster, status, search")
    demo.add_argument("--samples", default="samples", help="folder of documents (default ./samples)")
    demo.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="list each migration applied"
    )
    add_database_url(demo)
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    root = checkout_root()
    url = resolve_database_url(settings)
    settings = settings.model_copy(update={"database_url": url})
    applied = migrator.migrate(direct_database_url(settings)).newly_applied
    if getattr(args, "verbose", False):
        for migration in applied:
            print(f"applied {migration.path.name}")
    elif applied:
        print(f"applied {len(applied)} migration(s) (`ingest demo -v` lists them)")
    print(ensure_vector_index(direct_database_url(settings), settings))
    with migrated_pool(settings) as pool:
        report = enqueue_paths(pool, [args.samples], max_bytes=settings.max_file_bytes, batch_name="demo samples")
    outcomes = ", ".join(f"{outcome} {count}" for outcome, count in sorted(report.counts.items()))
    if report.batch_id is None and not report.counts.get("already_queued"):
        # A re-run: every sample is indexed as it is. No batch, and no run with nothing to do.
        print(f"{unqueued(report)}: no batch was written and no run is needed")
    else:
        print(f"enqueued {len(report.files)} file(s) into batch {report.batch_id}: {outcomes}")
        _run_the_drain(settings, root)
    if report.batch_id is not None:
        print(batch_line(settings, report.batch_id))
    print('\n$ ingest search "lease fencing" --limit 3')
    search.print_search(settings, "lease fencing", limit=3)
    # Vectors from the default embedder, offline: a paraphrase that shares no word with its page.
    print(f'\n$ ingest search --mode vector "{PARAPHRASE}" --limit 1')
    search.print_search(settings, PARAPHRASE, mode="vector", limit=1)
    print("\nSee the run and the asset in the UI: `ingest ui`, then http://127.0.0.1:3000")
    return 0


def batch_line(settings: Settings, batch_id: Any) -> str:
    with migrated_pool(settings) as pool:
        [batch] = IngestionRpc(pool).batch_report(batch_id=batch_id, limit=1).batches
    return (
        f"batch {batch.batch_id} ({batch.name}): {batch.status}, {batch.completed} of {batch.total_files} "
        f"file(s) indexed, {batch.failed} failed (`ingest status` shows it)"
    )


def _run_the_drain(settings: Settings, root: Path) -> None:
    os.environ.update(dagster_environment(settings))
    run_id, metadata = _drain_with_dagster(settings, root)
    print(f"Dagster run {run_id[:8]} of ingest_documents materialized document_index:")
    for line in materialization_lines(metadata):
        print(line)


def materialization_lines(metadata: dict[str, Any]) -> list[str]:
    """The materialization's metadata (plain values: see _plain) as a person reads it: the
    index's keys beside the run's, the statuses folded into `documents`, then its tables."""
    statuses = [(key.removeprefix("documents_"), n) for key, n in metadata.items() if key.startswith("documents_")]
    shown = {**metadata, "documents": _documents(metadata.get("documents", 0), statuses)}
    left = [(key, _text(shown[key])) for key in INDEX_KEYS if key in shown]
    extra = [key for key in SHOWN_WHEN_NOT_ZERO if metadata.get(key)]
    right = [(key, _text(shown[key])) for key in (*RUN_KEYS, *extra) if key in shown]
    rows = [
        (*(left[i] if i < len(left) else ("", "")), *(right[i] if i < len(right) else ("", "")))
        for i in range(max(len(left), len(right)))
    ]
    lines = render_table(["the index", "", "this run", ""], rows).splitlines()
    for key, heading in TABLES.items():
        if isinstance(metadata.get(key), Markdown):
            lines += ["", *([heading] if heading else []), *markdown_table(metadata[key])]
    return [*lines, ""]


def _documents(total: object, statuses: list[tuple[str, object]]) -> str:
    some = ", ".join(f"{status} {n}" for status, n in statuses if n)
    return f"{total} ({some})" if some else str(total)


def _text(value: object) -> str:
    if isinstance(value, datetime):
        return value.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def markdown_table(text: str) -> list[str]:
    """A Markdown table (and the lines under it) as a plain table, as the commands print them."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows]
    body = [row for row in cells[1:] if not all(re.fullmatch(r":?-+:?", cell) for cell in row)]
    rest = [line for line in text.splitlines() if line.strip() and not line.startswith("|")]
    return [*render_table(cells[0], body).splitlines(), *rest] if cells else rest


def _plain(value: Any) -> object:
    """A Dagster metadata value as a plain one: a timestamp as a time, Markdown marked as such."""
    import dagster as dg

    if isinstance(value, dg.TimestampMetadataValue):
        return datetime.fromtimestamp(value.value, UTC)
    if isinstance(value, dg.MarkdownMetadataValue):
        return Markdown(value.value or "")
    return getattr(value, "value", value)


def _drain_with_dagster(settings: Settings, root: Path) -> tuple[str, dict[str, Any]]:
    """One run of ingest_documents in this process, recorded in the instance the UI uses
    (Dagster's home <INGEST_DATA_DIR>/dagster, with the checkout's dagster.yaml)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import dagster as dg
        from dagster._core.instance.ref import InstanceRef

        from ingestion_pipeline.definitions import make_definitions
        from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource

        logging.getLogger("dagster").setLevel(logging.WARNING)
        job = make_definitions(
            DatabaseResource(database_url=settings.database_url), ProcessingResource()
        ).resolve_job_def("ingest_documents")
        home = write_home(root, settings.data_dir)
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            result = job.execute_in_process(
                instance=instance,
                raise_on_error=False,
                run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            )
    if not result.success:
        raise IngestError(f"the ingest_documents run {result.run_id[:8]} failed; see the log above")
    [materialization] = result.asset_materializations_for_node("document_index")
    return result.run_id, {key: _plain(value) for key, value in materialization.metadata.items()}
