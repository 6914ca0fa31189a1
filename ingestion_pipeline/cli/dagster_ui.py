"""`ingest ui` (Dagster webserver + daemon: `dg dev` in the checkout) and `ingest demo`
(the whole loop, in process).

Both use one Dagster home, <INGEST_DATA_DIR>/dagster, with the checkout's dagster.yaml copied
into it (orchestration/home.py): Dagster's storage is PostgreSQL and its step logs are under
that home (orchestration/instance.py), so the demo's run and its materialization are in the
UI when it opens, however the UI was started. Stopping `ingest ui` stops every Dagster
process it started (cli/process_group.py) and cancels the runs they had in flight
(orchestration/ui_runs.py)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestion_pipeline.cli import documents, search
from ingestion_pipeline.cli.common import add_database_url
from ingestion_pipeline.cli.db import ensure_vector_index
from ingestion_pipeline.cli.process_group import command_lines, run_process_group
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import direct_database_url, resolve_database_url
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.home import write_home
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    ui = commands.add_parser("ui", help="migrate, then run the Dagster UI and daemon (dg dev) on this pipeline")
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
    if not (root / "pyproject.toml").exists() or not (root / "dagster.yaml").exists():
        raise IngestError("run this from the project folder (it needs pyproject.toml and dagster.yaml)")
    return root


def dagster_environment(settings: Settings) -> dict[str, str]:
    """What Dagster's processes need to find the same databases and data folder as we do
    (they run in the checkout, so its .env reaches them as it reaches `ingest`)."""
    env = {"INGEST_DATA_DIR": str(settings.data_dir.resolve())}
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
    if settings.direct_database_url:
        env["INGEST_DIRECT_DATABASE_URL"] = settings.direct_database_url
    return env


def cmd_ui(args: argparse.Namespace, settings: Settings) -> int:
    root = checkout_root()
    migrator.migrate(direct_database_url(settings))
    print(ensure_vector_index(direct_database_url(settings), settings), flush=True)
    dg = Path(sys.executable).parent / "dg"
    if not dg.exists():
        raise IngestError(
            f"{dg} is missing: install the project's dependencies (`make install`, which includes dagster-dg-cli)"
        )
    home = write_home(root, settings.data_dir)
    # Our own instance (the stop marks runs canceling in it) finds the storage as Dagster's processes do.
    os.environ.update(dagster_environment(settings))
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    command = [str(dg), "dev", "--host", args.host, "--port", str(args.port)]
    with _quiet_dagster():
        from ingestion_pipeline.orchestration import ui_runs

        with ui_runs.ui_instance(home) as instance:
            print(f"Dagster UI on http://{args.host}:{args.port} (Ctrl-C stops it); Dagster's home: {home}", flush=True)
            canceling: list[str] = []

            def cancel_in_flight(pgid: int) -> None:
                canceling.extend(ui_runs.cancel_in_flight(instance, command_lines(pgid)))
                if canceling:
                    print(f"stopping: {len(canceling)} run(s) in flight marked canceling", flush=True)

            code = run_process_group(command, env=env, cwd=root, before_interrupt=cancel_in_flight)
            for run_id, status in ui_runs.finish_canceled(instance, canceling).items():
                print(f"run {run_id[:8]} interrupted by the stop: {status}", flush=True)
    # Nothing is left to do, but the interpreter's teardown of all that Dagster imported took
    # 0.3 s on idle cores and 1.2 s on busy ones, out of the stop's 10 s (process_group.py):
    # skip it, as a process that has flushed its output and closed what it opened may.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@contextlib.contextmanager
def _quiet_dagster() -> Iterator[None]:
    """Dagster's import-time warnings (deprecations, previews) are not the user's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("dagster").setLevel(logging.WARNING)
        yield


PARAPHRASE = "playful animals near streams"  # samples/river-otters.html has none of these words


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    root = checkout_root()
    url = resolve_database_url(settings)
    settings = settings.model_copy(update={"database_url": url})
    for migration in migrator.migrate(direct_database_url(settings)).newly_applied:
        print(f"applied {migration.path.name}")
    print(ensure_vector_index(direct_database_url(settings), settings))
    with migrated_pool(settings) as pool:
        report = enqueue_paths(pool, [args.samples], max_bytes=settings.max_file_bytes, batch_name="demo samples")
    if report.batch_id is not None:
        print(f"enqueued {len(report.files)} file(s) into batch {report.batch_id}")
    print(render_table(["result", "files"], sorted(report.counts.items())) + "\n")
    if report.batch_id is None and not report.counts.get("already_queued"):
        # A re-run: every sample is indexed as it is. No batch, and no run with nothing to do.
        print(f"{documents.unqueued(report)}: no batch was written and no run is needed\n")
    else:
        _run_the_drain(settings, root)
    if report.batch_id is not None:
        documents.print_status(settings, batch_id=report.batch_id)
        print()
    search.print_search(settings, "lease fencing", limit=3)
    # Vectors from the default embedder, offline: a paraphrase that shares no word with its page.
    print(f'\n$ ingest search --mode vector "{PARAPHRASE}" --limit 1')
    search.print_search(settings, PARAPHRASE, mode="vector", limit=1)
    print("\nSee the run and the asset in the UI: `ingest ui`, then http://127.0.0.1:3000")
    return 0


def _run_the_drain(settings: Settings, root: Path) -> None:
    os.environ.update(dagster_environment(settings))
    run_id, metadata = _drain_with_dagster(settings, root)
    print(f"Dagster run {run_id[:8]} of ingest_documents materialized document_index:")
    print(render_table(["metric", "value"], [(key, getattr(value, "value", value)) for key, value in metadata.items()]))
    print()


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
    return result.run_id, dict(materialization.metadata)
