"""`ingest show KEY|PATH|DOCUMENT_ID`: a document, its versions (newest first) and their jobs;
with `--bytes`, one version's bytes (the latest's, or a kept older one's) on standard output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Set
from typing import TYPE_CHECKING
from uuid import UUID

from ingestion_pipeline.cli.common import (
    EXIT_NOTHING_DONE,
    add_database_url,
    positive_int,
    print_json,
)
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.models import DeletedDocument, DocumentHistory, DocumentSummary, DocumentVersion
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.lookup import parse_ref, shown_key
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    show = commands.add_parser("show", help="a document, its versions and their jobs (or one version's bytes)")
    show.add_argument(
        "document", metavar="KEY|PATH|ID", help="a source key (file:///…, s3://…), a local path, or a document id"
    )
    show.add_argument(
        "--collection", metavar="NAME", default=None, help=f"where a key is looked up (default {DEFAULT_COLLECTION!r})"
    )
    show.add_argument("--version", type=positive_int, metavar="N", help="with --bytes: this version (default: latest)")
    show.add_argument(
        "--bytes",
        dest="write_bytes",
        action="store_true",
        help="write the version's bytes to standard output (older versions' only when kept: INGEST_KEEP_VERSIONS)",
    )
    show.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(show)
    show.set_defaults(handler=cmd_show)


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    ref = parse_ref(args.document)
    document_id, key = (ref, None) if isinstance(ref, UUID) else (None, ref)
    collection = args.collection or DEFAULT_COLLECTION
    with migrated_pool(settings) as pool:
        rpc = IngestionRpc(pool)
        rpc.require_collections([args.collection])  # named: a typo is an error, not "no document"
        history = rpc.document_history(document_id=document_id, collection=collection, source_key=key)
        if not history.ok or history.document is None:
            deleted = rpc.deleted_document(collection, key) if key else None
            return not_found(history, key or args.document, collection if key else None, deleted, as_json=args.json)
        if args.write_bytes:
            return write_version_bytes(rpc, history.document, args.version)
        kept = set(rpc.kept_versions(history.document.document_id))
        notes = rpc.document_notes(history.document.document_id)
    if args.json:
        print_json({**_as_json(history, kept), "notes": notes})
    else:
        print_history(history.document, history.versions, kept)
        for note in notes:
            print(f"note: {note}")
    return 0


def not_found(
    history: DocumentHistory, ref: str, collection: str | None, deleted: DeletedDocument | None, *, as_json: bool
) -> int:
    """No document of that id, or no live one of that key (`collection`): one line, which
    says when the key's document was deleted and how to see its versions (`--json`: the
    RPC's answer and `deleted_document`)."""
    if as_json:
        answer = history.model_dump(mode="json", exclude={"fenced"})
        print_json({**answer, "deleted_document": deleted.model_dump(mode="json") if deleted else None})
        return EXIT_NOTHING_DONE
    where = f" in collection {collection!r}" if collection is not None else ""
    if deleted is None:
        print(f"no document {shown_key(ref)}{where}")
    else:
        print(
            f"no live document {shown_key(ref)}{where}: it was deleted at {deleted.deleted_at:%Y-%m-%d %H:%M:%S %Z} "
            f"(`ingest show {deleted.document_id}` lists its versions; enqueue the file again to bring it back)"
        )
    return EXIT_NOTHING_DONE


def write_version_bytes(rpc: IngestionRpc, document: DocumentSummary, version: int | None) -> int:
    wanted = version or document.version or 1
    content = rpc.version_bytes(document.document_id, wanted)
    if content is None:
        raise IngestError(
            f"the bytes of version {wanted} of {document.source_key or document.document_id} are not kept "
            f"(kept: {', '.join(map(str, rpc.kept_versions(document.document_id))) or 'none'}); "
            "INGEST_KEEP_VERSIONS sets how many versions' bytes are kept"
        )
    sys.stdout.buffer.write(content)
    sys.stdout.buffer.flush()
    return 0


def _as_json(history: DocumentHistory, kept: set[int]) -> dict[str, object]:
    data = history.model_dump(mode="json", exclude={"fenced"})
    for version in data["versions"]:
        version["bytes_kept"] = version["version"] in kept
    return data


def _jobs(version: DocumentVersion) -> str:
    return ", ".join(
        f"{j.kind} {j.status}" + (" (superseded)" if j.stage == "superseded" else "") for j in version.jobs
    )


def print_history(d: DocumentSummary, versions: list[DocumentVersion], kept: Set[int] = frozenset()) -> None:
    print(f"document {d.document_id}  {shown_key(d.source_key) or d.source_name}  (collection {d.collection})")
    indexed = f"indexed at version {d.indexed_version}" if d.indexed_version else d.status
    print(f"{d.title or d.source_name}: {indexed}, latest version {d.version or '-'}, {d.chunk_count} chunks")
    if d.deleted_at:
        print(f"deleted at {d.deleted_at:%Y-%m-%d %H:%M:%S}")
    print()
    print(
        render_table(
            ["version", "outcome", "bytes", "kept", "sha256", "enqueued", "jobs", "error"],
            [
                (
                    v.version,
                    v.outcome or "",
                    v.byte_size,
                    "yes" if v.version in kept else "",
                    v.content_sha256[:12],
                    f"{v.enqueued_at:%Y-%m-%d %H:%M:%S}",
                    _jobs(v),
                    v.error_message or "",
                )
                for v in versions
            ],
        )
    )
