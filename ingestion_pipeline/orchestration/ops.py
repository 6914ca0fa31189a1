"""Ops: drain the queue through the worker, refresh batches, and the janitor's passes."""

# no `from __future__ import annotations`: Dagster reads the op and config annotations at runtime

from uuid import UUID

import dagster as dg
import psycopg

from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from ingestion_pipeline.worker import Worker, janitor


class DrainConfig(dg.Config):
    max_jobs: int = 200
    concurrency: int | None = None


@dg.op(description="Claim up to max_jobs jobs and process them through the worker.")
def drain_queue(context: dg.OpExecutionContext, config: DrainConfig, database: DatabaseResource,
                processing: ProcessingResource) -> dict:
    try:
        with database.pool() as pool:
            worker = Worker(pool, database.settings(), label=f"dagster-{context.run_id[:8]}",
                            concurrency=config.concurrency, embedder=processing.make_embedder(),
                            chunking=processing.chunking())
            report = worker.run(drain=True, max_jobs=config.max_jobs)
    except (IngestError, psycopg.OperationalError) as exc:
        # Infrastructure, not a document: the run fails, with the reason in one line.
        raise dg.Failure(description=f"ingestion database unavailable: {exc}", allow_retries=True) from None
    summary = report.as_dict()
    context.add_output_metadata({key: dg.MetadataValue.int(value) if isinstance(value, int)
                                 else dg.MetadataValue.float(float(value)) if isinstance(value, float)
                                 else dg.MetadataValue.text(str(value)) for key, value in summary.items()})
    context.log.info(f"drained: {summary}")
    return summary


class RefreshConfig(dg.Config):
    batch_ids: list[str] = []  # empty: every batch whose status disagrees with its jobs


@dg.op(description="Recompute the status of import batches from their jobs.")
def refresh_batches(context: dg.OpExecutionContext, config: RefreshConfig, database: DatabaseResource) -> dict:
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
    context.add_output_metadata({"expired": result.expired,
                                 "job_ids": dg.MetadataValue.json([str(j) for j in result.job_ids])})
    return result.expired


@dg.op(ins={"after": dg.In(dg.Nothing)},
       description="Recount batches left pending/processing with no open job, and batches whose counters drifted.")
def refresh_stuck_batches(context: dg.OpExecutionContext, database: DatabaseResource) -> int:
    with database.rpc() as rpc:
        stuck = rpc.refresh_stuck_batches()
        drifted = rpc.refresh_drifted_batches()
    context.add_output_metadata({"refreshed": stuck.refreshed + drifted.refreshed, "stuck": stuck.refreshed,
                                 "drifted": drifted.refreshed})
    return stuck.refreshed + drifted.refreshed


@dg.op(ins={"after": dg.In(dg.Nothing)},
       description="Delete rows of abandoned generations in bounded passes, within a time budget.")
def cleanup_abandoned_generations(context: dg.OpExecutionContext, database: DatabaseResource) -> dict:
    settings = database.settings()
    with database.rpc() as rpc:
        totals = janitor.cleanup_abandoned_generations(rpc, batch_size=settings.cleanup_batch_size,
                                                       time_budget_seconds=settings.janitor_time_budget_seconds)
    context.add_output_metadata(totals)
    return totals
