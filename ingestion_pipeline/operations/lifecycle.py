"""The operator's lifecycle actions, shared by the `ingest delete|cancel|retry` commands and
the Dagster jobs `delete_documents`, `cancel_import_batch` and `retry_failed_jobs`: what
to call for each request, and what each refusal means in words a user understands.

The state changes themselves are the RPCs' (`delete_document`, `cancel_import_batch`,
`retry_failed_ingestion_jobs`; docs/state-machine.md#lifecycle-deleting-cancelling-retrying)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from ingestion_pipeline.db.models import Refusal, RpcResult
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.lookup import resolve_refs

# Refusals of the RPCs (and `source_not_found`, of the name lookup), as a user reads them.
REASONS: dict[str, str] = {
    Refusal.NOT_FOUND: "not found",
    Refusal.ALREADY_DELETED: "already deleted",
    "source_not_found": "no live document has this name",
    "key_not_found": "no live document has this key (or path) in the collection",
    Refusal.BATCH_NOT_FOUND: "no such batch",
    Refusal.NOTHING_OPEN: "nothing to cancel: no job of the batch is pending or processing",
    Refusal.COMPLETED: "completed jobs are not retried (to rebuild the document: ingest enqueue --reindex)",
    Refusal.LEASE_LIVE: "has a live lease (a worker is on it)",
    Refusal.ALREADY_QUEUED: "already queued (its document has an open job)",
    Refusal.CANCELLED: "cancelled jobs are not retried (enqueue the file again)",
    Refusal.DOCUMENT_DELETED: "its document was deleted",
    Refusal.BATCH_CANCELLED: "its import batch was cancelled (enqueue the file again, into a new batch)",
}


def reason_words(reason: str | None, what: str = "") -> str:
    """`not_found` names what was not found ("no such document"); other reasons read the same
    for every kind of request."""
    if reason == Refusal.NOT_FOUND and what:
        return f"no such {what}"
    return REASONS.get(reason or "", reason or "refused")


def parse_uuid(value: str, what: str) -> UUID:
    """A user's id; IngestError naming what it should have been (one line, no traceback)."""
    try:
        return UUID(str(value).strip())
    except ValueError:
        raise IngestError(f"not a {what} id: {value!r}") from None


def as_dict(result: RpcResult) -> dict[str, Any]:
    """An RPC result as plain JSON-able data (without the client's `fenced` marker)."""
    data: dict[str, Any] = result.model_dump(mode="json", exclude={"fenced"})
    if isinstance(data.get("batch"), dict):  # a nested BatchStatus: its counters, not the RPC envelope
        data["batch"] = {k: v for k, v in data["batch"].items() if k not in ("ok", "reason", "fenced")}
    return data


def delete_documents(
    rpc: IngestionRpc,
    document_ids: Iterable[UUID] = (),
    source_names: Iterable[str] = (),
    *,
    refs: Iterable[str] = (),
    collection: str | None = None,
) -> list[dict[str, Any]]:
    """Delete the given documents (`document_ids`; `refs`: ids, source keys or local paths,
    keys looked up in `collection`, default `default`) and every live document of the given
    source names (in `collection`, or in any when None), each in its own transaction
    (`delete_document`). One answer per document, in the order asked; a key no live
    document has is answered `{"ok": false, "reason": "key_not_found", "source_key": key}`,
    a name `{"ok": false, "reason": "source_not_found", "source_name": name}`. A document
    asked twice is deleted once."""
    resolved = resolve_refs(rpc, refs, collection or DEFAULT_COLLECTION)
    wanted: list[UUID] = list(dict.fromkeys([*document_ids, *resolved.document_ids]))
    results: list[dict[str, Any]] = [
        {"ok": False, "reason": "key_not_found", "source_key": key, "document_id": None}
        for key in resolved.missing_keys
    ]
    keys = dict(resolved.keys)
    names = list(dict.fromkeys(source_names))
    if names:
        found = rpc.live_documents_by_source(names, collection)
        keys.update({document.id: document.source_key for document in found if document.source_key})
        for name in names:
            matches = [document.id for document in found if document.source_name == name]
            if not matches:
                results.append({"ok": False, "reason": "source_not_found", "source_name": name, "document_id": None})
            wanted.extend(match for match in matches if match not in wanted)
    answers = [{**as_dict(rpc.delete_document(i)), "source_key": keys.get(i)} for i in wanted]
    return answers + results


def delete_collection_documents(rpc: IngestionRpc, collection: str, page: int = 1000) -> list[dict[str, Any]]:
    """Delete every live document of `collection`, a page of ids at a time, each through
    delete_document as `delete_documents` does (`ingest collection remove --delete-documents`).
    One answer per document; a document enqueued meanwhile may be missed (the removal that
    follows then refuses the collection as not empty)."""
    answers: list[dict[str, Any]] = []
    after = None
    while ids := rpc.live_document_ids(collection, after=after, limit=page):
        answers.extend(delete_documents(rpc, ids))
        after = ids[-1]
    return answers


def one_retry_form(job_ids: Sequence[object] | None, batch_id: object | None, all_failed: bool) -> bool:
    """A retry names exactly one of: jobs, a batch (its failed jobs), or every failed job."""
    return sum([bool(job_ids), batch_id is not None, bool(all_failed)]) == 1


def retry_jobs(
    rpc: IngestionRpc, *, job_ids: list[UUID] | None = None, batch_id: UUID | None = None, all_failed: bool = False
) -> dict[str, Any]:
    """Exactly one form: these jobs, the failed jobs of a batch, or every failed job."""
    if not one_retry_form(job_ids, batch_id, all_failed):
        raise IngestError("give exactly one of: job ids, a batch id, or all failed jobs")
    return as_dict(rpc.retry_failed(job_ids=job_ids or None, batch_id=batch_id))


def delete_detail(result: dict[str, Any]) -> str:
    """What one delete did (or why it was refused), in words."""
    if not result.get("ok"):
        words = reason_words(result.get("reason"), "document")
        if result.get("reason") == "already_deleted" and result.get("deleted_at"):
            words += f" (at {result['deleted_at']})"
        return words
    parts = ["removed from search"]
    if result.get("cancelled_job_id"):
        parts.append(f"its open job {result['cancelled_job_id']} cancelled")
    if result.get("in_flight"):
        parts.append("a worker was building it: its rows go with the next janitor run")
    elif result.get("purged"):
        parts.append("its rows and bytes purged")
    return "; ".join(parts)
