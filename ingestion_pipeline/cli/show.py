"""`ingest show KEY|PATH|DOCUMENT_ID`: a document, its versions (newest first) and their jobs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from ingestion_pipeline.cli.common import EXIT_NOTHING_DONE, add_collection, add_database_url, print_json
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.models import DocumentSummary, DocumentVersion
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import source_key_of
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    show = commands.add_parser("show", help="a document, its versions and their jobs")
    show.add_argument(
        "document", metavar="KEY|PATH|ID", help="a source key (file:///…, s3://…), a local path, or a document id"
    )
    add_collection(show)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(show)
    show.set_defaults(handler=cmd_show)


def lookup(text: str) -> tuple[UUID | None, str | None]:
    """A document id, a key as given (it has a scheme), or a local path made into its key."""
    try:
        return UUID(text), None
    except ValueError:
        pass
    if "://" in text or text.startswith("file:"):
        return None, text
    return None, source_key_of(Path(text))


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    document_id, key = lookup(args.document)
    with migrated_pool(settings) as pool:
        history = IngestionRpc(pool).document_history(
            document_id=document_id, collection=args.collection, source_key=key
        )
    if args.json:
        print_json(history.model_dump(mode="json", exclude={"fenced"}))
        return 0 if history.ok else EXIT_NOTHING_DONE
    if not history.ok or history.document is None:
        shown = key if key is not None else args.document
        print(f"no document {shown}" + (f" in collection {args.collection!r}" if key is not None else ""))
        return EXIT_NOTHING_DONE
    print_history(history.document, history.versions)
    return 0


def _jobs(version: DocumentVersion) -> str:
    return ", ".join(
        f"{j.kind} {j.status}" + (" (superseded)" if j.stage == "superseded" else "") for j in version.jobs
    )


def print_history(d: DocumentSummary, versions: list[DocumentVersion]) -> None:
    print(f"document {d.document_id}  {d.source_key or d.source_name}  (collection {d.collection})")
    indexed = f"indexed at version {d.indexed_version}" if d.indexed_version else d.status
    print(f"{d.title or d.source_name}: {indexed}, latest version {d.version or '-'}, {d.chunk_count} chunks")
    if d.deleted_at:
        print(f"deleted at {d.deleted_at:%Y-%m-%d %H:%M:%S}")
    print()
    print(
        render_table(
            ["version", "outcome", "bytes", "sha256", "enqueued", "jobs", "error"],
            [
                (
                    v.version,
                    v.outcome or "",
                    v.byte_size,
                    v.content_sha256[:12],
                    f"{v.enqueued_at:%Y-%m-%d %H:%M:%S}",
                    _jobs(v),
                    v.error_message or "",
                )
                for v in versions
            ],
        )
    )
