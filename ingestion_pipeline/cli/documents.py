"""`ingest enqueue`, `ingest status`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING
from uuid import UUID

from ingestion_pipeline.cli.common import (
    add_collection,
    add_collection_scope,
    add_database_url,
    add_selection,
    announce_new_collection,
    positive_int,
    print_json,
    selection_of,
)
from ingestion_pipeline.cli.progress import bar, drawn
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.enqueue import EnqueueReport, enqueue_paths
from ingestion_pipeline.operations.lookup import shown_key
from ingestion_pipeline.operations.selection import skipped_line
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands
    from ingestion_pipeline.db.models import FailedJob, IndexTotals

FILES_LISTED = 25


def register(commands: Commands) -> None:
    enqueue = commands.add_parser("enqueue", help="upload files and folders as one import batch")
    enqueue.add_argument(
        "paths", nargs="+", metavar="PATH", help="files, and folders whose documents are taken (recursive)"
    )
    enqueue.add_argument("--batch", metavar="NAME", help="batch name (default: 'import <time>')")
    enqueue.add_argument("--reindex", action="store_true", help="reindex files whose bytes are unchanged")
    add_collection(enqueue, creates=True)
    enqueue.add_argument(
        "--max-attempts", type=positive_int, metavar="N", help="attempts per job (INGEST_MAX_ATTEMPTS)"
    )
    add_selection(enqueue)
    enqueue.set_defaults(handler=cmd_enqueue)

    status = commands.add_parser("status", help="batches, job counts and failures")
    status.add_argument("--batch", metavar="ID", type=_uuid, help="one batch only")
    status.add_argument("--limit", type=positive_int, default=20, help="most recent batches shown (default 20)")
    add_collection_scope(status, "every collection")
    status.set_defaults(handler=cmd_status)

    for sub in (enqueue, status):
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        add_database_url(sub)


def _uuid(value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a batch id: {value!r}") from None


def cmd_enqueue(args: argparse.Namespace, settings: Settings) -> int:
    max_attempts = args.max_attempts or settings.max_attempts
    with migrated_pool(settings) as pool, announce_new_collection(pool, args.collection, confirmed=args.new_collection):
        progress = bar("enqueue", "file", draw=drawn(args.json))
        with progress:
            report = enqueue_paths(
                pool,
                args.paths,
                max_bytes=settings.max_file_bytes,
                batch_name=args.batch,
                reindex=args.reindex,
                max_attempts=max_attempts,
                collection=args.collection,
                keep_versions=settings.keep_versions,
                on_file=lambda _: progress.update(),
                on_files=lambda total: progress.reset(total=total),
                selection=selection_of(args),
            )
    for path, reason in report.skipped:  # found in a folder and passed over: the rest went in
        print(f"ingest: skipped {path}: {reason}", file=sys.stderr)
    if args.json:
        print_json(report.as_dict())
        return 0
    if len(report.files) <= FILES_LISTED:
        print(
            render_table(
                ["file", "outcome", "version", "document"],
                [(f.path, f.outcome, f.version or "", f.document_id) for f in report.files],
            )
        )
        print()
    print(render_table(["outcome", "files"], sorted(report.counts.items())))
    if report.passed_over:
        print(skipped_line(report.passed_over))
    print(batch_line(report))
    return 0


def batch_line(report: EnqueueReport) -> str:
    """The batch the files went into, or why there is none."""
    if report.batch_id is None:
        return f"nothing new to index: {unqueued(report)}; no batch was written"
    done = f", {report.batch_status}: nothing new to index" if report.batch_status != "processing" else ""
    return f"batch {report.batch_id} ({report.batch_name}): {len(report.files)} file(s){done}"


def unqueued(report: EnqueueReport) -> str:
    """What became of files that got no job: `4 file(s) unchanged (already indexed)`."""
    counts = report.counts
    said = []
    if counts.get("unchanged"):
        said.append(f"{counts['unchanged']} file(s) unchanged (already indexed)")
    if counts.get("already_queued"):
        said.append(f"{counts['already_queued']} already queued")
    return ", ".join(said) or f"{len(report.files)} file(s)"


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    print_status(settings, batch_id=args.batch, limit=args.limit, as_json=args.json, collection=args.collection)
    return 0


def print_status(
    settings: Settings,
    *,
    batch_id: UUID | None = None,
    limit: int = 20,
    as_json: bool = False,
    collection: str | None = None,
) -> None:
    with migrated_pool(settings) as pool:
        rpc = IngestionRpc(pool)
        rpc.require_collections([collection])
        report = rpc.batch_report(batch_id=batch_id, limit=limit, collection=collection)
        # the whole index (what Dagster's document_index shows), unless one batch or collection is asked for
        totals = None if batch_id or collection else rpc.index_totals()
    if batch_id and not report.batches:
        scope = f" holding documents of collection {collection!r}" if collection else ""
        raise IngestError(f"no batch {batch_id}{scope}")
    if as_json:
        shown = report.model_dump(mode="json", exclude={"fenced", "reason"})
        if totals is not None:
            shown["index"] = {
                **totals.model_dump(mode="json", exclude={"ok", "fenced", "reason"}),
                "documents": totals.documents,
            }
        print_json(shown)
        return
    if totals is not None:
        print(_totals_line(totals))
    rows = [
        (
            b.batch_id,
            b.name,
            b.status,
            b.jobs if collection else b.total_files,  # a batch may hold files of other collections
            b.pending,
            b.processing,
            b.completed,
            b.failed,
            b.cancelled,
            _age(b.oldest_pending_age_seconds),
        )
        for b in report.batches
    ]
    print(
        render_table(
            [
                "batch",
                "name",
                "status",
                "files",
                "pending",
                "processing",
                "completed",
                "failed",
                "cancelled",
                "oldest pending",
            ],
            rows,
        )
    )
    if report.failures:
        print("\nfailures:")
        print(
            render_table(
                ["file", "version", "searchable", "attempts", "error"],
                [
                    (
                        shown_key(f.source_key) or f.source_name,
                        f.version or "",
                        _searchable(f),
                        f"{f.attempt_count}/{f.max_attempts}",
                        f.error_message,
                    )
                    for f in report.failures
                ],
            )
        )


def _totals_line(totals: IndexTotals) -> str:
    statuses = ", ".join(f"{status} {count}" for status, count in totals.by_status().items())
    return (
        f"index: {totals.documents} document(s) ({statuses}), {totals.chunks} chunk(s), "
        f"{totals.collections} collection(s), {totals.sources} source(s), {totals.failed_jobs} failed job(s)"
    )


def _searchable(failure: FailedJob) -> str:
    """What search still returns of a failed job's document: the version its index was
    built from (an older one when a new version failed), or nothing."""
    if failure.indexed_version is not None:
        return f"version {failure.indexed_version}"
    return "nothing" if failure.latest_version is not None else ""  # older schemas: not known


def _age(seconds: int | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
