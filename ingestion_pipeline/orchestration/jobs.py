"""Jobs: the drain (materializes document_index), its checks, the batch refresh, the janitor."""

import dagster as dg

from ingestion_pipeline.orchestration.assets import INDEX_KEY
from ingestion_pipeline.orchestration.ops import (
    cleanup_abandoned_generations,
    expire_stale_leases,
    refresh_batches,
    refresh_stuck_batches,
    report_index_checks,
)

# Drain runs carry this tag; dagster.yaml caps how many run at once.
DRAIN_TAG = "ingestion/drain"

ingest_documents = dg.define_asset_job(
    "ingest_documents",
    selection=dg.AssetSelection.assets(INDEX_KEY).without_checks(),
    tags={DRAIN_TAG: "true"},
    description="Claim and index pending documents (one materialization of document_index).",
)

check_document_index = dg.define_asset_job(
    "check_document_index",
    selection=dg.AssetSelection.checks_for_assets(INDEX_KEY),
    description="Run the checks of document_index (what `ingest health` checks).",
)


@dg.job(description="Recompute import batch statuses from their jobs.")
def refresh_batch_status():
    refresh_batches()


@dg.job(description="Expire stale leases, heal stuck batches, clean abandoned generations, report the index checks.")
def janitor():
    expired = expire_stale_leases()
    cleaned = cleanup_abandoned_generations(after=refresh_stuck_batches(after=expired))
    report_index_checks(after=cleaned)
