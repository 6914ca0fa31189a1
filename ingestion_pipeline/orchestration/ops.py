"""Ops: refresh batches, and the janitor's passes (the drain is the document_index asset)."""

# no `from __future__ import annotations`: Dagster reads the op and config annotations at runtime

from typing import Any
from uuid import UUID

import dagster as dg

from ingestion_pipeline.orchestration.checks import check_evaluations
from ingestion_pipeline.orchestration.resources import DatabaseResource
from ingestion_pipeline.worker import janitor


class RefreshConfig(dg.Config):
    # a pydantic field (dg.Config copies the default for each run), not shared class state
    batch_ids: list[str] = []  # empty: every batch whose status disagrees with its jobs  # noqa: RUF012


@dg.op(description="Recompute the status of import batches from their jobs.")
def refresh_batches(
    context: dg.OpExecutionContext, config: RefreshConfig, database: DatabaseResource
) -> dict[str, Any]:
    with database.rpc() as rpc:
        if config.batch_ids:
            results = [rpc.refresh_batch(UUID(batch_id)) for batch_id in config.batch_ids]
        else:
            results = rpc.refresh_stuck_batches().batches + rpc.refresh_drifted_batches().batches
    statuses = {str(r.batch_id): r.status for r in results if r.ok}
    context.add_output_metadata({"refreshed": len(statuses), "statuses": dg.MetadataValue.json(statuses)})
    return statuses


@dg.op(description="Dead-letter stale leases whose attempts are exhausted; refresh their batches.")
def expire_stale_leases(context: dg.OpExecutionContext, database: DatabaseResource) -> int:
    with database.rpc() as rpc:
        result = rpc.expire_stale()
    context.add_output_metadata(
        {"expired": result.expired, "job_ids": dg.MetadataValue.json([str(j) for j in result.job_ids])}
    )
    return result.expired


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    description="Recount batches left pending/processing with no open job, and batches whose counters drifted.",
)
def refresh_stuck_batches(context: dg.OpExecutionContext, database: DatabaseResource) -> int:
    with database.rpc() as rpc:
        stuck = rpc.refresh_stuck_batches()
        drifted = rpc.refresh_drifted_batches()
    context.add_output_metadata(
        {"refreshed": stuck.refreshed + drifted.refreshed, "stuck": stuck.refreshed, "drifted": drifted.refreshed}
    )
    return stuck.refreshed + drifted.refreshed


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    description="Delete rows of abandoned generations in bounded passes, within a time budget.",
)
def cleanup_abandoned_generations(context: dg.OpExecutionContext, database: DatabaseResource) -> dict[str, Any]:
    settings = database.settings()
    with database.rpc() as rpc:
        totals = janitor.cleanup_abandoned_generations(
            rpc, batch_size=settings.cleanup_batch_size, time_budget_seconds=settings.janitor_time_budget_seconds
        )
    context.add_output_metadata(totals)
    return totals


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    description="Delete older versions' kept bytes beyond INGEST_KEEP_VERSIONS, and those of deleted documents, "
    "in bounded passes within a time budget.",
)
def cleanup_kept_version_bytes(context: dg.OpExecutionContext, database: DatabaseResource) -> dict[str, int]:
    settings = database.settings()
    with database.rpc() as rpc:
        totals = janitor.cleanup_kept_bytes(
            rpc,
            keep_versions=settings.keep_versions,
            batch_size=settings.cleanup_batch_size,
            time_budget_seconds=settings.janitor_time_budget_seconds,
        )
    context.add_output_metadata({**totals, "keep_versions": settings.keep_versions})
    return totals


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    description="Fold the search term counts' delta rows into one row per lexeme, in bounded passes within a "
    "time budget.",
)
def compact_search_terms(context: dg.OpExecutionContext, database: DatabaseResource) -> dict[str, int]:
    settings = database.settings()
    with database.rpc() as rpc:
        totals = janitor.compact_search_terms(
            rpc, batch_size=janitor.TERMS_PER_PASS, time_budget_seconds=settings.janitor_time_budget_seconds
        )
    context.add_output_metadata(totals)
    return totals


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    description="Run the checks of document_index and report their results on the asset.",
)
def report_index_checks(context: dg.OpExecutionContext, database: DatabaseResource) -> int:
    evaluations = check_evaluations(database)
    for evaluation in evaluations:
        # log_event handles AssetCheckEvaluation (Dagster 1.13); its annotation does not list it
        context.log_event(evaluation)  # type: ignore[arg-type]
    failed = [e.check_name for e in evaluations if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    if failed:
        context.log.warning(f"failing checks on document_index: {', '.join(failed)}")
    for warned in (e for e in evaluations if not e.passed and e.severity == dg.AssetCheckSeverity.WARN):
        context.log.warning(f"warning on document_index: {warned.description}")
    return len(failed)
