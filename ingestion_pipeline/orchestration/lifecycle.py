"""The operator's lifecycle actions as Dagster jobs: delete documents, cancel an import
batch, retry failed jobs (what `ingest delete|cancel|retry` do). Each job is one op that
records what it did as output metadata, and fails the run with a one-line dg.Failure when
its config is invalid or nothing matched."""

# no `from __future__ import annotations`: Dagster reads the op and config annotations at runtime

from typing import Any
from uuid import UUID

import dagster as dg

from ingestion_pipeline.errors import IngestError, UnknownCollection
from ingestion_pipeline.operations import lifecycle
from ingestion_pipeline.orchestration.resources import DatabaseResource


# The `[]` defaults in these configs are pydantic fields (dg.Config copies the default for
# each run), not shared class state; ClassVar, RUF012's remedy, would drop them from the config.
class DeleteDocumentsConfig(dg.Config):
    document_ids: list[str] = []  # noqa: RUF012
    # source keys (file:///…, s3://…) of live documents of `collection` (default `default`)
    source_keys: list[str] = []  # noqa: RUF012
    source_names: list[str] = []  # every live document of each name  # noqa: RUF012
    # where keys and names are looked up (unset: keys in `default`, names in every collection)
    collection: str | None = None


class CancelBatchConfig(dg.Config):
    batch_id: str


class RetryJobsConfig(dg.Config):
    # exactly one of the three
    job_ids: list[str] = []  # noqa: RUF012
    batch_id: str | None = None
    all_failed: bool = False


def _named(result: dict[str, Any]) -> str:
    return str(result.get("document_id") or result.get("source_key") or result.get("source_name"))


def _ids(values: list[str], what: str) -> list[UUID]:
    try:
        return [lifecycle.parse_uuid(value, what) for value in values]
    except IngestError as exc:
        raise dg.Failure(description=f"invalid config: {exc}") from None


@dg.op(
    description="Delete documents by id, source key or source name: out of search at once, open jobs cancelled, rows "
    "purged (or left to the janitor's guarded cleanup when a worker was on them)."
)
def delete_by_id_or_source(
    context: dg.OpExecutionContext, config: DeleteDocumentsConfig, database: DatabaseResource
) -> list[dict[str, Any]]:
    if not config.document_ids and not config.source_keys and not config.source_names:
        raise dg.Failure(description="invalid config: give document_ids, source_keys and/or source_names")
    document_ids = _ids(config.document_ids, "document")
    with database.rpc() as rpc:
        try:
            rpc.require_collections([config.collection])
        except UnknownCollection as exc:
            raise dg.Failure(description=f"invalid config: {exc}") from None
        results = lifecycle.delete_documents(
            rpc, document_ids, config.source_names, refs=config.source_keys, collection=config.collection
        )
    deleted = [r for r in results if r.get("ok")]
    refused = [r for r in results if not r.get("ok")]
    metadata: dict[str, Any] = {
        "deleted": len(deleted),
        "refused": len(refused),
        "in_flight": sum(1 for r in deleted if r.get("in_flight")),
        "purged": sum(1 for r in deleted if r.get("purged")),
        "results": dg.MetadataValue.json(results),
    }
    if not deleted:
        raise dg.Failure(
            description="nothing deleted: " + "; ".join(f"{_named(r)}: {lifecycle.delete_detail(r)}" for r in refused),
            metadata=metadata,
        )
    for r in refused:
        context.log.warning(f"not deleted: {_named(r)}: {lifecycle.delete_detail(r)}")
    context.add_output_metadata(metadata)
    return results


@dg.op(description="Cancel every pending or processing job of an import batch; the batch ends cancelled.")
def cancel_batch_jobs(
    context: dg.OpExecutionContext, config: CancelBatchConfig, database: DatabaseResource
) -> dict[str, Any]:
    [batch_id] = _ids([config.batch_id], "batch")
    with database.rpc() as rpc:
        result = lifecycle.as_dict(rpc.cancel_batch(batch_id))
    if not result.get("ok"):
        status = f" (the batch is {result['status']})" if result.get("status") else ""
        raise dg.Failure(
            description=f"batch {batch_id}: {lifecycle.reason_words(result.get('reason'), 'batch')}{status}",
            metadata={"result": dg.MetadataValue.json(result)},
        )
    context.add_output_metadata(
        {
            "cancelled": result.get("cancelled", 0),
            "in_flight": result.get("in_flight", 0),
            "nothing_open": bool(result.get("nothing_open")),
            "status": str((result.get("batch") or {}).get("status") or result.get("status")),
            "batch": dg.MetadataValue.json(result.get("batch") or {}),
            "job_ids": dg.MetadataValue.json(result.get("job_ids") or []),
        }
    )
    return result


@dg.op(description="Re-queue failed jobs: the given ones, a batch's, or every failed job (exactly one).")
def retry_jobs(context: dg.OpExecutionContext, config: RetryJobsConfig, database: DatabaseResource) -> dict[str, Any]:
    if not lifecycle.one_retry_form(config.job_ids, config.batch_id, config.all_failed):
        raise dg.Failure(description="invalid config: give exactly one of job_ids, batch_id, all_failed: true")
    job_ids = _ids(config.job_ids, "job")
    [batch_id] = _ids([config.batch_id], "batch") if config.batch_id is not None else [None]
    with database.rpc() as rpc:
        result = lifecycle.retry_jobs(rpc, job_ids=job_ids, batch_id=batch_id, all_failed=config.all_failed)
    refused = result.get("refused") or []
    metadata = {
        "retried": result.get("retried", 0),
        "refused": len(refused),
        "job_ids": dg.MetadataValue.json(result.get("job_ids") or []),
        "refusals": dg.MetadataValue.json(refused),
    }
    if not result.get("retried"):
        if refused:
            why = "; ".join(f"{r.get('job_id')}: {lifecycle.reason_words(r.get('reason'), 'job')}" for r in refused)
        else:
            why = f"no failed job in batch {batch_id}" if batch_id else "no failed job"
        raise dg.Failure(description=f"nothing retried: {why}", metadata=metadata)
    for r in refused:
        context.log.warning(f"not retried: {r.get('job_id')}: {lifecycle.reason_words(r.get('reason'), 'job')}")
    context.add_output_metadata(metadata)
    return result


@dg.job(
    description="Delete documents (config: document_ids, source_keys and/or source_names): out of search at once, "
    "their open jobs cancelled."
)
def delete_documents() -> None:
    delete_by_id_or_source()


@dg.job(description="Cancel an import batch (config: batch_id): every pending or processing job of it.")
def cancel_import_batch() -> None:
    cancel_batch_jobs()


@dg.job(description="Re-queue failed jobs (config: job_ids, batch_id, or all_failed: true).")
def retry_failed_jobs() -> None:
    retry_jobs()


LIFECYCLE_JOBS = [delete_documents, cancel_import_batch, retry_failed_jobs]
