"""`ingest reindex`: build documents' index again from their stored bytes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import EXIT_NOTHING_DONE, add_database_url, print_json, usage_error
from ingestion_pipeline.cli.lifecycle import uuids
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.reindex import reindex_documents
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    parser = commands.add_parser(
        "reindex",
        help="index documents again from their stored bytes (after an upgrade)",
        description="Queue a reindex job for the given documents, or with --all for every indexed document, "
        "in one new import batch; run workers (ingest work, or Dagster) to process it. Each "
        "document stays searchable with its current index until the new one commits. Use it "
        "after an upgrade that changes how the index is built (docs/search.md).",
    )
    parser.add_argument("document_ids", nargs="*", metavar="DOCUMENT_ID", help="document ids")
    parser.add_argument("--all", dest="all_indexed", action="store_true", help="every indexed document")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(parser)
    parser.set_defaults(handler=cmd_reindex)


def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    if bool(args.document_ids) == args.all_indexed:
        return usage_error("reindex", "give document ids or --all (not both)")
    try:
        document_ids = uuids(args.document_ids, "document") if args.document_ids else None
    except IngestError as exc:
        return usage_error("reindex", str(exc))
    with migrated_pool(settings) as pool:
        report = reindex_documents(pool, document_ids, max_attempts=settings.max_attempts)
    if args.json:
        print_json(report.as_dict())
    elif not report.outcomes:
        print("nothing to reindex: no document is indexed")
    else:
        counts = ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in sorted(report.counts.items()))
        print(f"batch {report.batch_id}: {counts}")
        if report.queued:
            print("run `ingest work --drain` (or let Dagster's sensor start a drain run) to build them")
    return 0 if report.queued else EXIT_NOTHING_DONE
