"""Jobs: the drain, the batch-status refresh, and the janitor."""

import dagster as dg

from ingestion_pipeline.orchestration.ops import (
    cleanup_abandoned_generations,
    drain_queue,
    expire_stale_leases,
    refresh_batches,
    refresh_stuck_batches,
)

# Drain runs carry this tag; dagster.yaml caps how many run at once.
DRAIN_TAG = "ingestion/drain"


@dg.job(tags={DRAIN_TAG: "true"}, description="Claim and process pending ingestion jobs.")
def ingest_documents():
    drain_queue()


@dg.job(description="Recompute import batch statuses from their jobs.")
def refresh_batch_status():
    refresh_batches()


@dg.job(description="Expire stale leases, heal stuck batches, clean abandoned generations.")
def janitor():
    expired = expire_stale_leases()
    cleanup_abandoned_generations(after=refresh_stuck_batches(after=expired))
