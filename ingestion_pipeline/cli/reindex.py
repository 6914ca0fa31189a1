"""`ingest reindex`: build documents' index again from their stored bytes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import (
    EXIT_NOTHING_DONE,
    add_database_url,
    add_document_refs,
    print_json,
    usage_error,
)
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.operations.lookup import resolve_refs, shown_key
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
    add_document_refs(
        parser,
        "keys are looked up in it (default 'default'); with --all, only its documents (default: every collection)",
    )
    parser.add_argument("--all", dest="all_indexed", action="store_true", help="every indexed document")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(parser)
    parser.set_defaults(handler=cmd_reindex)


def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    if bool(args.documents) == args.all_indexed:
        return usage_error("reindex", "give documents (keys, paths or ids) or --all (not both)")
    with migrated_pool(settings) as pool:
        IngestionRpc(pool).require_collections([args.collection])
        missing: list[str] = []
        document_ids = None
        if args.documents:
            resolved = resolve_refs(IngestionRpc(pool), args.documents, args.collection or DEFAULT_COLLECTION)
            document_ids, missing = resolved.document_ids, resolved.missing_keys
        report = reindex_documents(pool, document_ids, collection=args.collection, max_attempts=settings.max_attempts)
    if args.json:
        print_json({**report.as_dict(), "keys_not_found": missing})
        return 0 if report.queued else EXIT_NOTHING_DONE
    for key in missing:
        print(
            f"{shown_key(key)}: no live document has this key in collection {args.collection or DEFAULT_COLLECTION!r}"
        )
    if not report.outcomes:
        scope = f" in collection {args.collection!r}" if args.collection else ""
        print(f"nothing to reindex: no document{scope} is indexed" if args.all_indexed else "nothing to reindex")
    else:
        counts = ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in sorted(report.counts.items()))
        print(f"batch {report.batch_id}: {counts}")
        if report.queued:
            print("run `ingest work --drain` (or let Dagster's sensor start a drain run) to build them")
    return 0 if report.queued else EXIT_NOTHING_DONE
