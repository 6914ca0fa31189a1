"""Sensors: start drain runs while work is claimable; heal batches left unfinished; report a
drain that Dagster did not run (`ingest work`) on the asset; record failed drain runs on
the asset. Each skipped tick says why (shown on the tick in the UI). Intervals:
INGEST_IMPORT_SENSOR_INTERVAL_SECONDS, INGEST_BATCH_SENSOR_INTERVAL_SECONDS,
INGEST_INDEX_SENSOR_INTERVAL_SECONDS."""

from __future__ import annotations

import math
import warnings

import dagster as dg

from ingestion_pipeline.db.models import IndexTotals, SensorState
from ingestion_pipeline.errors import DatabaseUnavailable, IngestError
from ingestion_pipeline.orchestration.assets import INDEX_KEY
from ingestion_pipeline.orchestration.index_totals import (
    current_mark,
    drain_mark,
    latest_materialization_metadata,
    totals_metadata,
)
from ingestion_pipeline.orchestration.jobs import (
    check_document_index,
    drain_run_tags,
    ingest_documents,
    refresh_batch_status,
)
from ingestion_pipeline.orchestration.resources import DatabaseResource
from ingestion_pipeline.settings import get_settings

SETTINGS = get_settings()
# Dagster's own run_failure_sensor passes a beta parameter to SensorDefinition: a warning
# in every Dagster process's log that nobody can act on.
warnings.filterwarnings("ignore", message="Parameter `owners` of initializer `SensorDefinition.__init__`")

ACTIVE_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def _next_cursor(context: dg.SensorEvaluationContext) -> int:
    """A tick counter that advances only when runs are requested. Run keys built from it
    are unique per request (Dagster drops a repeated key forever) and stable if the same
    tick is evaluated again before its cursor is stored."""
    return int(context.cursor or 0) + 1


def queue_state(database: DatabaseResource) -> SensorState | dg.SkipReason:
    """The queue as the sensors see it, or why they cannot look (shown on the tick). An
    unreachable database stays an error: a red tick is what an operator must notice."""
    try:
        with database.rpc() as rpc:
            return rpc.sensor_state()
    except DatabaseUnavailable:
        raise
    except IngestError as exc:  # e.g. pending migrations: `dagster dev` before `ingest db migrate`
        return dg.SkipReason(f"the ingestion database is not ready: {exc}")


def index_totals(database: DatabaseResource) -> IndexTotals | dg.SkipReason:
    """As queue_state: the index's totals, or why they cannot be read."""
    try:
        with database.rpc() as rpc:
            return rpc.index_totals()
    except DatabaseUnavailable:
        raise
    except IngestError as exc:
        return dg.SkipReason(f"the ingestion database is not ready: {exc}")


def active_drain_runs(instance: dg.DagsterInstance) -> int:
    return len(
        instance.get_run_ids(filters=dg.RunsFilter(job_name=ingest_documents.name, statuses=ACTIVE_STATUSES), limit=100)
    )


@dg.sensor(
    job=ingest_documents,
    minimum_interval_seconds=SETTINGS.import_sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests drain runs while jobs are claimable: one per INGEST_DRAIN_BACKLOG_PER_RUN claimable "
    "jobs, at most INGEST_MAX_DRAIN_RUNS (default: one per core) at once.",
)
def import_batch_sensor(
    context: dg.SensorEvaluationContext, database: DatabaseResource
) -> dg.SensorResult | dg.SkipReason:
    settings = database.settings()
    state = queue_state(database)
    if isinstance(state, dg.SkipReason):
        return state
    if state.claimable == 0:
        return dg.SkipReason(
            f"nothing claimable ({state.pending_later} waiting for a retry time, {state.processing} in progress)"
        )
    active = active_drain_runs(context.instance)
    # Runs drain until nothing is claimable, so a run already active takes new work too.
    wanted = min(settings.max_drain_runs, math.ceil(state.claimable / settings.drain_backlog_per_run)) - active
    if wanted <= 0:
        return dg.SkipReason(
            f"{active} drain run(s) already active for {state.claimable} claimable job(s) "
            f"(cap {settings.max_drain_runs})"
        )
    tick = _next_cursor(context)
    tags = {**drain_run_tags(settings), "ingestion/claimable": str(state.claimable)}
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=f"drain-{tick}-{i}", tags=tags) for i in range(wanted)],
        cursor=str(tick),
    )


@dg.sensor(
    job=refresh_batch_status,
    minimum_interval_seconds=SETTINGS.batch_sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Refreshes batches still pending/processing although all their jobs are terminal.",
)
def batch_status_sensor(
    context: dg.SensorEvaluationContext, database: DatabaseResource
) -> dg.SensorResult | dg.SkipReason:
    state = queue_state(database)
    if isinstance(state, dg.SkipReason):
        return state
    stuck = state.stuck_batch_ids
    if not stuck:
        return dg.SkipReason("every batch's status agrees with its jobs")
    tick = _next_cursor(context)
    batch_ids = [str(batch_id) for batch_id in stuck]
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=f"refresh-{tick}",
                run_config=dg.RunConfig(ops={"refresh_batches": {"config": {"batch_ids": batch_ids}}}),
            )
        ],
        cursor=str(tick),
    )


@dg.sensor(
    job=check_document_index,
    minimum_interval_seconds=SETTINGS.index_sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Reports the index's totals on document_index when jobs finished since its latest "
    "materialization and no drain run is active (a drain by `ingest work`), then runs its checks.",
)
def index_totals_sensor(
    context: dg.SensorEvaluationContext, database: DatabaseResource
) -> dg.SensorResult | dg.SkipReason:
    totals = index_totals(database)
    if isinstance(totals, dg.SkipReason):
        return totals
    shown = latest_materialization_metadata(context.instance, INDEX_KEY)
    mark = current_mark(totals)
    if shown is None and totals.jobs_finished == 0:
        return dg.SkipReason("nothing drained yet")
    if shown is not None and drain_mark(shown) == mark:
        return dg.SkipReason(
            f"document_index shows the index as it is: {totals.documents} document(s), {totals.chunks} chunk(s)"
        )
    active = active_drain_runs(context.instance)
    if active:  # their materializations record the totals when they end
        return dg.SkipReason(f"{active} drain run(s) active: their materializations will record the totals")
    # A materialization, not an observation: the index did change (generations committed), and
    # the asset's page shows the latest materialization's metadata. Its checks then read "Not
    # evaluated" (they ran for an earlier one), hence the check run. The key is the mark: a
    # tick evaluated again requests nothing new.
    return dg.SensorResult(
        asset_events=[
            dg.AssetMaterialization(
                asset_key=INDEX_KEY,
                description="The index's totals after a drain that no Dagster run did (e.g. `ingest work`).",
                metadata={**totals_metadata(totals), "reported_by": "index_totals_sensor"},
            )
        ],
        run_requests=[dg.RunRequest(run_key=f"checks-{totals.drain_mark()}")],
    )


@dg.run_failure_sensor(
    monitored_jobs=[ingest_documents],
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Records each failed drain run as an observation of document_index.",
)
def failed_drain_run_sensor(context: dg.RunFailureSensorContext) -> None:
    # Its claimed jobs are safe: their leases expire and another run reclaims them. What is
    # recorded here puts the failure where an operator looks, next to the materializations.
    reason = context.failure_event.message or "unknown"
    context.instance.report_runless_asset_event(
        dg.AssetObservation(
            asset_key=INDEX_KEY,
            description=f"drain run {context.dagster_run.run_id[:8]} failed: {reason}"[:500],
            metadata={"failed_run_id": context.dagster_run.run_id, "reason": reason[:2000]},
        )
    )
    context.log.warning(f"drain run {context.dagster_run.run_id} failed: {reason}")
