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
from ingestion_pipeline.processing import embedder_from_settings, embedder_record
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    parser = commands.add_parser(
        "reindex",
        help="index documents again from their stored bytes (after an upgrade)",
        description="Queue a reindex job for the given documents, or with --all for every indexed document, "
        "or with --embeddings for every document whose vectors another embedder made, in one new import "
        "batch; run workers (ingest work, or Dagster) to process it. Each document stays searchable with "
        "its current index until the new one commits. Use it after an upgrade that changes how the index "
        "is built (docs/search.md), or after changing INGEST_EMBEDDER (docs/embeddings.md).",
    )
    add_document_refs(
        parser,
        "keys are looked up in it (default 'default'); with --all, only its documents (default: every collection)",
    )
    parser.add_argument("--all", dest="all_indexed", action="store_true", help="every indexed document")
    parser.add_argument(
        "--embeddings",
        action="store_true",
        help="every indexed document whose generation another embedder made (name, dimensions or version) "
        "than INGEST_EMBEDDER's, or that records none",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(parser)
    parser.set_defaults(handler=cmd_reindex)


def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    if [bool(args.documents), args.all_indexed, args.embeddings].count(True) != 1:
        return usage_error("reindex", "give documents (keys, paths or ids), --all or --embeddings (one of them)")
    # A bad configuration stops here, in one line; a folder model's version is its digest.
    embedder = embedder_record(embedder_from_settings(settings)) if args.embeddings else None
    with migrated_pool(settings) as pool:
        IngestionRpc(pool).require_collections([args.collection])
        missing: list[str] = []
        document_ids = None
        if args.documents:
            resolved = resolve_refs(IngestionRpc(pool), args.documents, args.collection or DEFAULT_COLLECTION)
            document_ids, missing = resolved.document_ids, resolved.missing_keys
        report = reindex_documents(
            pool, document_ids, collection=args.collection, max_attempts=settings.max_attempts, embedder=embedder
        )
    if args.json:
        print_json({**report.as_dict(), "keys_not_found": missing})
        return 0 if report.queued else EXIT_NOTHING_DONE
    for key in missing:
        print(
            f"{shown_key(key)}: no live document has this key in collection {args.collection or DEFAULT_COLLECTION!r}"
        )
    if not report.outcomes:
        scope = f" in collection {args.collection!r}" if args.collection else ""
        if embedder is not None:
            print(f"nothing to reindex: every indexed document{scope} was embedded by {embedder.describe()}")
        else:
            print(f"nothing to reindex: no document{scope} is indexed" if args.all_indexed else "nothing to reindex")
    else:
        counts = ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in sorted(report.counts.items()))
        print(f"batch {report.batch_id}: {counts}")
        if report.queued:
            print("run `ingest work --drain` (or let Dagster's sensor start a drain run) to build them")
        if report.queued and embedder is not None:
            print(
                f"their new generations are embedded by {embedder.describe()}; each document keeps its "
                "current index, and stays searchable, until its new one commits"
            )
    return 0 if report.queued else EXIT_NOTHING_DONE
