"""`ingest delete`, `ingest cancel`, `ingest retry`: the operator's lifecycle commands.

Exit status: 0 when something matched and was done (even if other items were refused),
1 when nothing was (unknown ids, already deleted, nothing open, nothing failed), 2 for
usage errors (a missing or doubled form, an id that is not a UUID)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING
from uuid import UUID

from ingestion_pipeline.cli.common import (
    EXIT_NOTHING_DONE,
    add_database_url,
    add_document_refs,
    print_json,
    usage_error,
)
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations import lifecycle
from ingestion_pipeline.operations.lookup import shown_key
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands

ROWS_LISTED = 25


def register(commands: Commands) -> None:
    delete = commands.add_parser(
        "delete",
        help="delete documents: out of search at once, their open jobs cancelled",
        description="Delete documents by id, source key, local path (its file: key) or file name (every "
        "live document of that name). Each leaves search at once; an open job of it is cancelled, so "
        "a worker building it is refused from then on; its rows and bytes are purged at once, or by "
        "the janitor when a worker was on it.",
    )
    add_document_refs(
        delete, "where keys and names are looked up (default: keys in 'default', names in every collection)"
    )
    delete.add_argument(
        "--source",
        dest="source_names",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="file names as enqueued (every live document of the name)",
    )
    delete.set_defaults(handler=cmd_delete)

    cancel = commands.add_parser(
        "cancel",
        help="cancel an import batch: every pending or processing job of it",
        description="Cancel every open job of an import batch; documents already indexed stay indexed and the "
        "batch ends cancelled. Workers on its jobs are refused from then on.",
    )
    cancel.add_argument("batch_id", metavar="BATCH_ID")
    cancel.set_defaults(handler=cmd_cancel)

    retry = commands.add_parser(
        "retry",
        help="re-queue failed jobs: given ones, a batch's, or all",
        description="Re-queue failed jobs (their attempts start over). Exactly one of: job ids, --batch, "
        "--failed. Completed, cancelled, open jobs and jobs of deleted documents are refused.",
    )
    retry.add_argument("job_ids", nargs="*", metavar="JOB_ID", help="job ids (ingest status --json lists them)")
    retry.add_argument("--batch", dest="batch_id", metavar="BATCH_ID", help="every failed job of this batch")
    retry.add_argument("--failed", dest="all_failed", action="store_true", help="every failed job")
    retry.set_defaults(handler=cmd_retry)

    for sub in (delete, cancel, retry):
        sub.add_argument("--json", action="store_true", help="machine-readable output: the RPC results")
        add_database_url(sub)


def uuids(values: list[str], what: str) -> list[UUID]:
    return [lifecycle.parse_uuid(value, what) for value in values]


def cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    if not args.documents and not args.source_names:
        return usage_error("delete", "give documents (keys, paths or ids) or --source NAME")
    with migrated_pool(settings) as pool:
        rpc = IngestionRpc(pool)
        rpc.require_collections([args.collection])
        results = lifecycle.delete_documents(
            rpc, (), args.source_names, refs=args.documents, collection=args.collection
        )
    deleted = [r for r in results if r.get("ok")]
    if args.json:
        print_json(results)
    else:
        print(
            render_table(
                ["document", "source", "result", "detail"],
                [
                    (
                        r.get("document_id") or "",
                        shown_key(r.get("source_key")) or r.get("source_name") or "",
                        "deleted" if r.get("ok") else "refused",
                        lifecycle.delete_detail(r),
                    )
                    for r in results
                ],
            )
        )
        print(f"{len(deleted)} deleted, {len(results) - len(deleted)} refused")
    return 0 if deleted else EXIT_NOTHING_DONE


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    try:
        batch_id = lifecycle.parse_uuid(args.batch_id, "batch")
    except IngestError as exc:
        return usage_error("cancel", str(exc))
    with migrated_pool(settings) as pool:
        result = lifecycle.as_dict(IngestionRpc(pool).cancel_batch(batch_id))
    if args.json:
        print_json(result)
    elif result.get("ok"):
        counters = result.get("batch") or {}
        print(
            render_table(
                ["batch", "status", "files", "completed", "failed", "cancelled", "open"],
                [
                    (
                        result.get("batch_id"),
                        counters.get("status", result.get("status")),
                        counters.get("total"),
                        counters.get("completed"),
                        counters.get("failed"),
                        counters.get("cancelled"),
                        counters.get("open"),
                    )
                ],
            )
        )
        in_flight = result.get("in_flight") or 0
        if result.get("nothing_open"):
            print("no job of it was open: the batch is marked cancelled all the same, so it takes no new files")
        else:
            print(
                f"cancelled {result.get('cancelled', 0)} job(s)"
                + (
                    f"; {in_flight} of them were being processed: their workers are refused from now on, and "
                    "the janitor removes what they wrote"
                    if in_flight
                    else ""
                )
                + "; documents already indexed stay indexed"
            )
    else:
        words = lifecycle.reason_words(result.get("reason"), "batch")
        status = f" (the batch is {result['status']})" if result.get("status") else ""
        print(f"batch {batch_id}: {words}{status}")
    return 0 if result.get("ok") else EXIT_NOTHING_DONE


def cmd_retry(args: argparse.Namespace, settings: Settings) -> int:
    if not lifecycle.one_retry_form(args.job_ids, args.batch_id, args.all_failed):
        return usage_error("retry", "give exactly one of: JOB_ID..., --batch BATCH_ID, --failed")
    try:
        job_ids = uuids(args.job_ids, "job")
        batch_id = lifecycle.parse_uuid(args.batch_id, "batch") if args.batch_id is not None else None
    except IngestError as exc:
        return usage_error("retry", str(exc))
    with migrated_pool(settings) as pool:
        result = lifecycle.retry_jobs(
            IngestionRpc(pool), job_ids=job_ids, batch_id=batch_id, all_failed=args.all_failed
        )
    retried = [str(j) for j in result.get("job_ids") or []]
    refused = result.get("refused") or []
    if args.json:
        print_json(result)
    else:
        rows = [(job_id, "retried", "queued again, attempts start over") for job_id in retried]
        rows += [(r.get("job_id"), "refused", lifecycle.reason_words(r.get("reason"), "job")) for r in refused]
        if rows:
            print(render_table(["job", "result", "detail"], rows[:ROWS_LISTED]))
            if len(rows) > ROWS_LISTED:
                print(f"… and {len(rows) - ROWS_LISTED} more (--json lists them all)")
        where = f" in batch {batch_id}" if batch_id else ""
        if not rows:
            print(f"nothing to retry: no failed job{where}")
        else:
            print(f"{len(retried)} retried, {len(refused)} refused")
    return 0 if result.get("ok", True) and (result.get("retried") or retried) else EXIT_NOTHING_DONE
