"""`ingest ui` (Dagster webserver + daemon: `dg dev` on the checkout's workspace.yaml, run in
Dagster's home) and what it shares with `ingest demo` (the whole loop, in process: cli/demo.py).

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
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import add_database_url
from ingestion_pipeline.cli.db import ensure_vector_index
from ingestion_pipeline.cli.process_group import command_lines, run_process_group
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import direct_database_url
from ingestion_pipeline.errors import IngestError
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

    from ingestion_pipeline.cli import demo  # it builds on this module's checkout and environment

    demo.register(commands)


def checkout_root() -> Path:
    root = Path.cwd()
    if not (root / "pyproject.toml").exists() or not (root / "dagster.yaml").exists():
        raise IngestError("run this from the project folder (it needs pyproject.toml and dagster.yaml)")
    return root


def dagster_environment(settings: Settings) -> dict[str, str]:
    """What Dagster's processes need to find the same databases and data folder as we do."""
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
    env = dev_environment(root, settings, home)
    command = [*dev_command(dg, root), "--host", args.host, "--port", str(args.port)]
    with _quiet_dagster():
        from ingestion_pipeline.orchestration import ui_runs

        with ui_runs.ui_instance(home) as instance:
            print(f"Dagster UI on http://{args.host}:{args.port} (Ctrl-C stops it); Dagster's home: {home}", flush=True)
            canceling: list[str] = []

            def cancel_in_flight(pgid: int) -> None:
                canceling.extend(ui_runs.cancel_in_flight(instance, command_lines(pgid)))
                if canceling:
                    print(f"stopping: {len(canceling)} run(s) in flight marked canceling", flush=True)

            code = run_process_group(command, env=env, cwd=home, before_interrupt=cancel_in_flight)
            for run_id, status in ui_runs.finish_canceled(instance, canceling).items():
                print(f"run {run_id[:8]} interrupted by the stop: {status}", flush=True)
    # Nothing is left to do, but the interpreter's teardown of all that Dagster imported took
    # 0.3 s on idle cores and 1.2 s on busy ones, out of the stop's 10 s (process_group.py):
    # skip it, as a process that has flushed its output and closed what it opened may.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def dev_command(dg: Path, root: Path) -> list[str]:
    """`dg dev` on the checkout's code location, to run in Dagster's home. In the checkout it
    would read its dagster.yaml, which is there for plain `dg dev` and `dagster dev` (their
    temporary home's configuration), and warn at every start that with DAGSTER_HOME set the file
    "will not be used" (its copy in the home is); named by its workspace file, the location
    loads from any folder, and `dg dev` stays in the home, where dagster.yaml is the one used."""
    return [str(dg), "dev", "--workspace", str(root / "workspace.yaml")]


def dev_environment(root: Path, settings: Settings, home: Path) -> dict[str, str]:
    """`dg dev`'s environment: ours, the checkout's .env (Dagster's processes start in its home,
    not in the checkout), then what our settings resolved from both (the data folder absolute,
    whatever folder they run in), and the home."""
    return {**os.environ, **checkout_env(root), **dagster_environment(settings), "DAGSTER_HOME": str(home)}


def checkout_env(root: Path) -> dict[str, str]:
    """The checkout's .env, which Dagster's processes read from the folder they start in (over
    the environment, as `dagster dev` loads it): they start in Dagster's home, so it is passed on."""
    from dotenv import dotenv_values

    dotenv = root / ".env"
    return {k: v for k, v in dotenv_values(dotenv).items() if v is not None} if dotenv.is_file() else {}


@contextlib.contextmanager
def _quiet_dagster() -> Iterator[None]:
    """Dagster's import-time warnings (deprecations, previews) are not the user's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("dagster").setLevel(logging.WARNING)
        yield
