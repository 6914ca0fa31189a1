"""`ingest sync SOURCE`: mirror a folder or a bucket prefix into a collection, once."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import (
    add_collection,
    add_database_url,
    add_selection,
    announce_new_collection,
    print_json,
    selection_of,
)
from ingestion_pipeline.cli.progress import bar, drawn, sync_postfix
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.operations.lookup import shown_key
from ingestion_pipeline.operations.selection import skipped_line
from ingestion_pipeline.operations.sync import COUNTED, Pool, SyncOptions, SyncReport, sync_source
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands

ROWS_LISTED = 25


def register(commands: Commands) -> None:
    sync = commands.add_parser(
        "sync",
        help="mirror a folder or bucket into a collection: new, changed and deleted files",
        description="One pass over SOURCE (a local folder, file://…, s3://bucket/prefix, or any URL fsspec "
        "knows): new files are enqueued, changed ones become new versions, files gone from the source "
        "are deleted from the index, and files whose size and modification time (or ETag) are unchanged "
        "are not read. Deletes happen only after a complete listing: a listing that fails anywhere "
        "deletes nothing, and neither does an empty one without --allow-empty. S3 credentials and "
        "endpoint come from the AWS environment and config (AWS_ENDPOINT_URL, AWS_PROFILE, …).",
    )
    sync.add_argument("source", metavar="SOURCE", help="a folder or a URL (s3://bucket/prefix, file:///…)")
    add_collection(sync, creates=True)
    sync.add_argument("--no-delete", dest="delete", action="store_false", help="never delete documents")
    sync.add_argument("--dry-run", action="store_true", help="say what would change; read and write nothing")
    sync.add_argument(
        "--allow-empty", action="store_true", help="an empty listing deletes every document of the source"
    )
    add_selection(sync)
    sync.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(sync)
    sync.set_defaults(handler=cmd_sync)


def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    options = SyncOptions(
        collection=args.collection,
        max_bytes=settings.max_file_bytes,
        delete=args.delete,
        dry_run=args.dry_run,
        allow_empty=args.allow_empty,
        max_attempts=settings.max_attempts,
        keep_versions=settings.keep_versions,
        selection=selection_of(args),
    )
    return run_sync(
        settings,
        args.json,
        lambda pool, on_entry: sync_source(pool, args.source, options, on_entry=on_entry),
        collection_of=lambda _: args.collection,
        confirmed=args.new_collection,
    )


def run_sync(
    settings: Settings,
    as_json: bool,
    sync: Callable[[Pool, Callable[[str, Counter[str]], None]], SyncReport],
    collection_of: Callable[[Pool], str | None],
    *,
    confirmed: bool = True,
) -> int:
    """Run `sync` (given the pool and a callback per listed file) with a progress bar on a
    terminal, then print its report (`ingest sync`, `ingest source sync`); a collection the
    sync created (`collection_of` names the one it syncs into) is said on stderr. Exit
    status 1 when an entry failed, said on stderr in one line (failure_line). The bar
    counts files and what became of them, with no total or ETA: the listing is read as the
    pass goes, so its length is known only at the end (listing it first would cost a second
    pass over a bucket)."""
    with migrated_pool(settings) as pool, _announcing(pool, collection_of(pool), confirmed):
        progress = bar("sync", "file", draw=drawn(as_json))

        def on_entry(key: str, counts: Counter[str]) -> None:
            progress.set_postfix_str(sync_postfix(counts), refresh=False)
            progress.update()

        with progress:
            report = sync(pool, on_entry)
    if as_json:
        print_json(report.as_dict())
    else:
        print_report(report)
    if not report.failures:
        return 0
    print(failure_line(report, as_json), file=sys.stderr)
    return 1  # the rest of the pass is done; a script still hears of it


def failure_line(report: SyncReport, as_json: bool) -> str:
    """Why the sync exits 1, in one line: how many entries failed, the first with its reason,
    and where the others are listed (the table shows ROWS_LISTED)."""
    count = len(report.failures)
    key, reason = report.failures[0]
    reason = " ".join(reason.split())  # one line, whatever the reason held
    if as_json:
        where = 'the JSON\'s "failures" lists ' + ("it" if count == 1 else "them")
    elif count <= ROWS_LISTED:
        where = "the table lists " + ("it" if count == 1 else "them")
    else:
        where = "--json lists them all"
    entries = "1 entry" if count == 1 else f"{count} entries"
    return f"ingest: {entries} failed, the rest of the pass is done (first: {shown_key(key)}: {reason}); {where}"


def _announcing(pool: Pool, collection: str | None, confirmed: bool) -> AbstractContextManager[None]:
    return announce_new_collection(pool, collection, confirmed=confirmed) if collection is not None else nullcontext()


def print_report(report: SyncReport) -> None:
    if report.dry_run and report.changes:
        print(render_table(["file", "would be"], [(shown_key(k), c) for k, c in report.changes[:ROWS_LISTED]]))
        if len(report.changes) > ROWS_LISTED:
            print(f"… and {len(report.changes) - ROWS_LISTED} more (--json lists them all)")
        print()
    print(render_table(list(COUNTED), [tuple(report.counts[name] for name in COUNTED)]))
    if report.failures:
        print("\nfailed:")
        print(render_table(["file", "reason"], [(shown_key(k), r) for k, r in report.failures[:ROWS_LISTED]]))
    if report.passed_over:
        print(f"\n{skipped_line(report.passed_over)}")
    if report.deletes_skipped:
        print(f"\nnothing deleted: {report.deletes_skipped}")
    where = f"batch {report.batch_id}" if report.batch_id else "no batch (nothing to index)"
    print(f"\n{'dry run: nothing changed' if report.dry_run else where}; collection {report.collection!r}")
