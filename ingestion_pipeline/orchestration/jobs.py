"""Jobs: the drain (materializes document_index, then runs its checks), the checks alone, the
batch refresh, the janitor; the operator's lifecycle jobs (delete, cancel, retry) are in
orchestration/lifecycle.py."""

import dagster as dg

from ingestion_pipeline.orchestration.assets import INDEX_KEY
from ingestion_pipeline.orchestration.checks import HEALTH_CHECKS
from ingestion_pipeline.orchestration.lifecycle import (  # noqa: F401  (re-exported: every job is listed here)
    LIFECYCLE_JOBS,
    cancel_import_batch,
    delete_documents,
    retry_failed_jobs,
)
from ingestion_pipeline.orchestration.ops import (
    cleanup_abandoned_generations,
    cleanup_kept_version_bytes,
    compact_search_terms,
    expire_stale_leases,
    refresh_batches,
    refresh_stuck_batches,
    report_index_checks,
)
from ingestion_pipeline.settings import Settings, get_settings

# Dagster's run monitoring fails a run that is older than this tag says.
MAX_RUNTIME_TAG = "dagster/max_runtime"

# Drain runs carry this tag; dagster.yaml caps how many run at once.
DRAIN_TAG = "ingestion/drain"


def drain_run_tags(settings: Settings) -> dict[str, str]:
    """A drain run stops claiming after INGEST_DRAIN_RUN_SECONDS and then finishes its jobs
    in flight; Dagster's run monitoring fails a run still going a lease's lifetime after
    that. The default launcher cannot see a run worker that died (killed, out of memory):
    without this limit such a run would stay STARTED, and the sensor would count it as a
    drain run forever. Its jobs are safe either way: their leases expire and are reclaimed."""
    max_runtime = settings.drain_run_seconds + settings.stale_after_seconds
    return {DRAIN_TAG: "true", MAX_RUNTIME_TAG: str(int(max_runtime))}


# The asset with every check on it: the health checks run as the run's second step, so the
# asset page shows them evaluated for the materialization the run recorded (not "Not
# evaluated" until the janitor's next tick), and the drain's own check of failed documents.
ingest_documents = dg.define_asset_job(
    "ingest_documents",
    selection=dg.AssetSelection.assets(INDEX_KEY),
    tags=drain_run_tags(get_settings()),
    # The drain is one step whose worker runs its own threads: the multiprocess executor
    # would only add a second Python process (and its start-up) to every run.
    executor_def=dg.in_process_executor,
    description="Claim and index pending documents while any are claimable, within a job and a time budget "
    "(one materialization of document_index), then run its checks.",
)

check_document_index = dg.define_asset_job(
    "check_document_index",
    selection=dg.AssetSelection.checks(*HEALTH_CHECKS),
    description="Run the checks of document_index (what `ingest health` checks).",
)


@dg.job(description="Recompute import batch statuses from their jobs.")
def refresh_batch_status() -> None:
    refresh_batches()


@dg.job(
    description="Expire stale leases, heal stuck batches, clean abandoned generations and older versions' kept "
    "bytes, fold the search term counts, report the index checks."
)
def janitor() -> None:
    expired = expire_stale_leases()
    cleaned = cleanup_abandoned_generations(after=refresh_stuck_batches(after=expired))
    report_index_checks(after=compact_search_terms(after=cleanup_kept_version_bytes(after=cleaned)))
