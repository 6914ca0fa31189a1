"""The asset this pipeline builds: `document_index`, the committed index generations
(pages, sections, chunks) in PostgreSQL. Materializing it drains the queue: each drain run
records one materialization with what it indexed."""

# no `from __future__ import annotations`: Dagster reads the config annotations at runtime

import dagster as dg
import psycopg

from ingestion_pipeline.errors import DatabaseUnavailable, IngestError
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from ingestion_pipeline.worker import Worker, WorkerReport

INDEX_KEY = dg.AssetKey("document_index")


class DrainConfig(dg.Config):
    max_jobs: int = 200
    concurrency: int | None = None


@dg.asset(key=INDEX_KEY, group_name="ingestion", kinds={"postgres"},
          description="Committed index generations of the uploaded documents (pages, sections, chunks with "
                      "full-text vectors). A materialization claims up to max_jobs pending jobs and indexes them.")
def document_index(context: dg.AssetExecutionContext, config: DrainConfig, database: DatabaseResource,
                   processing: ProcessingResource) -> dg.MaterializeResult:
    try:
        with database.pool() as pool:
            worker = Worker(pool, database.settings(), label=f"dagster-{context.run.run_id[:8]}",
                            concurrency=config.concurrency, embedder=processing.make_embedder(),
                            chunking=processing.chunking())
            report = worker.run(drain=True, max_jobs=config.max_jobs)
    except (DatabaseUnavailable, psycopg.OperationalError) as exc:
        # Infrastructure, not a document: the run fails, with the reason in one line.
        raise dg.Failure(description=f"ingestion database unavailable: {exc}", allow_retries=True) from None
    except IngestError as exc:  # e.g. pending migrations, or a pool the server has no room for
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    context.log.info(drain_summary(report))
    return dg.MaterializeResult(metadata=drain_metadata(report))


def drain_metadata(report: WorkerReport) -> dict:
    counts = report.counts
    return {
        "documents_indexed": counts["completed"],
        "documents_failed": counts["failed"],
        "retried": counts["retried"],
        "lease_lost": counts["lease_lost"],
        "abandoned": counts["abandoned"],
        "claimed": report.claimed,
        "chunks": report.chunks,
        "batches_touched": len(report.batch_ids),
        "docs_per_second": dg.MetadataValue.float(float(report.docs_per_second)),
        "seconds": dg.MetadataValue.float(round(report.seconds, 3)),
        "worker_id": report.worker_id,
    }


def drain_summary(report: WorkerReport) -> str:
    counts = report.counts
    return (f"indexed {counts['completed']}, failed {counts['failed']}, retried {counts['retried']} of "
            f"{report.claimed} claimed job(s); {report.chunks} chunk(s) in {len(report.batch_ids)} batch(es); "
            f"{report.docs_per_second} docs/s")
