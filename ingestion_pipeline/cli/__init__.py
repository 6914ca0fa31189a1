"""The `ingest` command. Errors the user can act on print one line and exit 1.

A command's module is imported only when that command runs (`ingest search` does not pay for
Dagster, the parsers or the RPC client's models; `ingest --help` imports none of them): the
parser lists every command by its name and help (`COMMANDS`) and asks only the chosen one's
module to add its arguments. tests/unit/test_cli_imports.py checks the list against what the
modules register.

`ingest search` is answered by a resident process when one runs for the caller's settings
(search_client.py: the model read once); both it and `ingest` itself run a parsed command with
`execute`."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ingestion_pipeline.errors import IngestError, first_line

if TYPE_CHECKING:
    from ingestion_pipeline.settings import Settings

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell shows for a tool its pipe's reader left

# Every command, in the order `ingest --help` lists them: its help and the module of
# ingestion_pipeline.cli whose `register` adds it (with its arguments and handler).
COMMANDS: dict[str, tuple[str, str]] = {
    "db": ("db", "the database: embedded server and migrations"),
    "enqueue": ("documents", "upload files and folders as one import batch"),
    "status": ("documents", "batches, job counts and failures"),
    "sync": ("sync", "mirror a folder or bucket into a collection: new, changed and deleted files"),
    "source": ("sources", "registered folders and buckets, synced on a schedule"),
    "collection": ("collections", "collections: public or private, and their members"),
    "show": ("show", "a document, its versions and their jobs (or one version's bytes)"),
    "search": ("search", "search the committed index: one result per document (or the best passages), best first"),
    "delete": ("lifecycle", "delete documents: out of search at once, their open jobs cancelled"),
    "cancel": ("lifecycle", "cancel an import batch: every pending or processing job of it"),
    "retry": ("lifecycle", "re-queue failed jobs: given ones, a batch's, or all"),
    "reindex": ("reindex", "index documents again from their stored bytes (after an upgrade)"),
    "work": ("work", "claim and process jobs (without Dagster)"),
    "health": ("operations", "queue and index checks after an apply; exit 1 if action needed"),
    "janitor": (
        "operations",
        "the janitor's passes without Dagster: expire stale final attempts, refresh stuck batches, "
        "clean abandoned generations",
    ),
    "metrics": ("metrics", "serve the queue's metrics in Prometheus text format at /metrics (the [metrics] extra)"),
    "ui": ("dagster_ui", "migrate, then run the Dagster UI and daemon (dg dev) on this pipeline"),
    "demo": ("dagster_ui", "migrate, enqueue the samples, drain with Dagster, status, search"),
    "mcp": ("mcp", "serve the index to agents over the Model Context Protocol (read-only tools)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `ingest`. `command`: only that command's module is imported and gets its
    arguments; the others are listed by name and help (what `ingest --help` shows; "" or an
    unknown name: only listed). None: every command in full."""
    parser = argparse.ArgumentParser(prog="ingest", description="Document ingestion on PostgreSQL.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the worker does")
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = {module for module, _ in COMMANDS.values()} if command is None else {COMMANDS.get(command, ("", ""))[0]}
    for name, (module, help_text) in COMMANDS.items():
        if name in commands.choices:  # added by its module with an earlier command
            continue
        if module in chosen:
            importlib.import_module(f"{__name__}.{module}").register(commands)
        else:
            commands.add_parser(name, help=help_text)
    return parser


def command_of(argv: list[str]) -> str:
    """The command `argv` names: its first word that is not an option (`ingest`'s own options,
    -v and -h, take no value); "" when there is none (`ingest --help`)."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["search"]:  # `ingest -v search …` logs here: run in this process
        from ingestion_pipeline.cli.search_client import search_command  # the standard library only

        return search_command(argv)
    return run_command(argv)


def run_command(argv: list[str]) -> int:
    """`ingest ARGV` in this process: its exit status (argparse's usage errors exit 2)."""
    return execute(build_parser(command_of(argv)).parse_args(argv))


def execute(args: argparse.Namespace, settings_of: Callable[..., Settings] | None = None) -> int:
    """The parsed command run, its errors turned into one line on stderr and a status.
    `settings_of`: what loads the settings (default `load_settings`; the resident search
    process keeps the ones it loaded)."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format=LOG_FORMAT)
    try:
        from ingestion_pipeline.settings import load_settings  # pydantic: not for `ingest --help`

        overrides = {"database_url": args.database_url} if getattr(args, "database_url", None) else {}
        settings = (settings_of or load_settings)(**overrides)
        code: int = args.handler(args, settings)
        sys.stdout.flush()  # inside the try: a closed pipe raises here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away (`ingest status | head`): stop quietly, as Unix tools do. What
        # was done is done; only the rest of the output is lost. stdout goes to /dev/null so
        # the interpreter's flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except IngestError as exc:
        print(f"ingest: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ingest: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        message = database_error(exc)
        if message is None:
            raise
        print(f"ingest: error: {message}", file=sys.stderr)
        return 1


def database_error(exc: Exception) -> str | None:
    """The one line for a psycopg error, None for anything else. psycopg is imported by the
    commands that use a database; when it was not, `exc` is not one of its errors."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None or not isinstance(exc, psycopg.Error):
        return None
    if isinstance(exc, psycopg.OperationalError):
        return f"database unavailable: {first_line(exc)}"
    # e.g. permissions, or a schema changed by hand
    sqlstate = getattr(exc, "sqlstate", None)
    return f"database error: {first_line(exc)}{f' (SQLSTATE {sqlstate})' if sqlstate else ''}"


if __name__ == "__main__":
    sys.exit(main())
