"""`ingest source add|list|remove|sync`: registered sources, shared by every machine and by
Dagster (rows in the database), and one sync of one of them under its lease."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import (
    EXIT_NOTHING_DONE,
    add_collection,
    add_database_url,
    add_selection,
    positive_int,
    print_json,
)
from ingestion_pipeline.cli.sync import run_sync
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.source_sync import sync_registered
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    source = commands.add_parser("source", help="registered folders and buckets, synced on a schedule")
    actions = source.add_subparsers(dest="source_command", required=True)

    add = actions.add_parser("add", help="register a source (Dagster syncs it every --every minutes)")
    add.add_argument("name", metavar="NAME", help="letters, digits, . _ - (at most 63)")
    add.add_argument("url", metavar="URL", help="a folder or a URL (s3://bucket/prefix, file:///…)")
    add_collection(add, creates=True)
    add.add_argument("--every", type=positive_int, metavar="MINUTES", help="sync interval (default: on demand only)")
    add.add_argument("--no-delete", dest="delete", action="store_false", help="its syncs never delete documents")
    add_selection(add)
    add.set_defaults(handler=cmd_add)

    listing = actions.add_parser("list", help="registered sources and their last sync")
    listing.set_defaults(handler=cmd_list)

    remove = actions.add_parser("remove", help="forget a source (its documents stay; `ingest delete` removes them)")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(handler=cmd_remove)

    sync = actions.add_parser("sync", help="sync a registered source now (refused while another sync holds it)")
    sync.add_argument("name", metavar="NAME")
    sync.add_argument("--dry-run", action="store_true", help="say what would change; read and write nothing")
    sync.set_defaults(handler=cmd_sync)

    for sub in (add, listing, remove, sync):
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        add_database_url(sub)


def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    # a local folder is registered by its absolute path, as its files' keys are made
    url = args.url if "://" in args.url or args.url.startswith("file:") else os.path.abspath(args.url)
    with migrated_pool(settings) as pool:
        rpc = IngestionRpc(pool)
        rpc.check_new_collection(args.collection, confirmed=args.new_collection)  # before its first sync creates it
        result = rpc.register_source(
            args.name,
            url,
            collection=args.collection,
            every_minutes=args.every,
            delete_vanished=args.delete,
            include=args.include or (),
            exclude=args.exclude or (),
        )
        if result.ok and rpc.missing_collections([args.collection]):  # a typo shows now, not at the sync
            print(
                f"ingest: collection {args.collection!r} does not exist yet: the first sync of {args.name} creates it",
                file=sys.stderr,
            )
    if args.json:
        print_json(result.model_dump(mode="json", exclude={"fenced"}))
    elif result.ok:
        every = f", every {args.every} min" if args.every else ", on demand"
        print(f"source {args.name}: {url} -> collection {args.collection!r}{every}{_files(args.include, args.exclude)}")
    if not result.ok and not args.json:
        detail = getattr(result, "detail", None)
        words = "a source of this name exists" if result.reason == "source_exists" else f"invalid: {detail}"
        raise IngestError(f"source {args.name!r} not added: {words}")
    return 0 if result.ok else EXIT_NOTHING_DONE


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    with migrated_pool(settings) as pool:
        sources = IngestionRpc(pool).sync_sources()
    if args.json:
        print_json([source.model_dump(mode="json") for source in sources])
        return 0
    if not sources:
        print("no registered source (ingest source add NAME URL)")
        return 0
    rows = [
        (
            s.name,
            s.url,
            s.collection,
            s.every_minutes or "",
            "yes" if s.delete_vanished else "no",
            _files(s.include_globs, s.exclude_globs).removeprefix(", ") or "documents",
            "syncing" if s.syncing else (s.last_status or "never synced"),
            f"{s.last_started_at:%Y-%m-%d %H:%M}" if s.last_started_at else "",
            ", ".join(f"{k} {v}" for k, v in (s.last_counts or {}).items() if v) or s.last_error or "",
        )
        for s in sources
    ]
    headers = [
        "name",
        "url",
        "collection",
        "every (min)",
        "deletes",
        "files",
        "last sync",
        "started",
        "counts or error",
    ]
    print(render_table(headers, rows))
    return 0


def _files(include: list[str] | None, exclude: list[str] | None) -> str:
    """`, include *.css, exclude drafts/*`: the globs that choose a source's files (none: its documents)."""
    said = [f"include {' '.join(include)}"] if include else []
    said += [f"exclude {' '.join(exclude)}"] if exclude else []
    return "".join(f", {words}" for words in said)


def cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    with migrated_pool(settings) as pool:
        result = IngestionRpc(pool).remove_source(args.name)
    if args.json:
        print_json(result.model_dump(mode="json", exclude={"fenced"}))
    elif result.ok:
        running = getattr(result, "holder", None)
        note = f" (the sync {running} still running stops at its next renewal)" if running else ""
        print(f"source {args.name} removed; its documents stay indexed{note}")
    else:
        raise IngestError(f"no registered source {args.name!r} (ingest source list)")
    return 0 if result.ok else EXIT_NOTHING_DONE


def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    return run_sync(
        settings,
        args.json,
        lambda pool, on_entry: sync_registered(
            pool,
            args.name,
            max_bytes=settings.max_file_bytes,
            max_attempts=settings.max_attempts,
            keep_versions=settings.keep_versions,
            dry_run=args.dry_run,
            on_entry=on_entry,
        ),
        collection_of=lambda pool: next(
            (s.collection for s in IngestionRpc(pool).sync_sources() if s.name == args.name), None
        ),
    )
