"""The `ingest` command. Errors the user can act on print one line and exit 1."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import psycopg

from ingestion_pipeline.cli import (
    collections,
    dagster_ui,
    db,
    documents,
    lifecycle,
    mcp,
    metrics,
    operations,
    reindex,
    search,
    show,
    sources,
    sync,
    work,
)
from ingestion_pipeline.errors import IngestError, first_line
from ingestion_pipeline.settings import load_settings

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell shows for a tool its pipe's reader left


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ingest", description="Document ingestion on PostgreSQL.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the worker does")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (
        db,
        documents,
        sync,
        sources,
        collections,
        show,
        search,
        lifecycle,
        reindex,
        work,
        operations,
        metrics,
        dagster_ui,
        mcp,
    ):
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        overrides = {"database_url": args.database_url} if getattr(args, "database_url", None) else {}
        settings = load_settings(**overrides)
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
    except psycopg.OperationalError as exc:
        print(f"ingest: error: database unavailable: {first_line(exc)}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:  # e.g. permissions, or a schema changed by hand
        print(
            f"ingest: error: database error: {first_line(exc)}{f' (SQLSTATE {exc.sqlstate})' if exc.sqlstate else ''}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("ingest: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
