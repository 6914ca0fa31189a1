"""The `ingest` command. Errors the user can act on print one line and exit 1."""

from __future__ import annotations

import argparse
import logging
import sys

import psycopg

from ingestion_pipeline.cli import (
    collections,
    dagster_ui,
    db,
    documents,
    lifecycle,
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
        dagster_ui,
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
        return code
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
