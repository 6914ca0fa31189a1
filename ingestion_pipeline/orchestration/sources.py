"""Registered sources in Dagster: one asset, `source_sync`, partitioned by source name (a
dynamic partition per row of `sync_sources`), and `sync_source_sensor`, which keeps the
partitions equal to the registered sources and requests a sync of each one whose interval
has passed.

Why one partitioned asset rather than an asset per source: sources are rows that
`ingest source add` creates at any time, while assets are fixed when the code location
loads (reading the database then would tie loading to it being up). A dynamic partition per
source appears in the UI as soon as the sensor sees it, with its own materialization
history: each sync's counts as metadata (`new`, `changed`, `unchanged`, `deleted`,
`failed`), and a failed listing as a failed run whose message is the one-line reason.
The drain path is unchanged: the import sensor picks up the batch a sync enqueued.
"""

# no `from __future__ import annotations`: Dagster reads the asset and sensor annotations at runtime

import time
from typing import Any

import dagster as dg

from ingestion_pipeline.db.models import SyncSource
from ingestion_pipeline.errors import DatabaseUnavailable, IngestError
from ingestion_pipeline.operations.source_sync import sync_registered
from ingestion_pipeline.operations.sync import COUNTED
from ingestion_pipeline.orchestration.resources import DatabaseResource
from ingestion_pipeline.settings import get_settings

SOURCE_PARTITIONS = dg.DynamicPartitionsDefinition(name="sync_sources")
SETTINGS = get_settings()


@dg.asset(
    partitions_def=SOURCE_PARTITIONS,
    group_name="sources",
    description="A registered source (ingest source add) mirrored into its collection: one partition per "
    "source, one materialization per sync, its counts as metadata.",
)
def source_sync(context: dg.AssetExecutionContext, database: DatabaseResource) -> dg.MaterializeResult[Any]:
    name = context.partition_key
    settings = database.settings()
    try:
        with database.pool() as pool:
            report = sync_registered(
                pool,
                name,
                max_bytes=settings.max_file_bytes,
                max_attempts=settings.max_attempts,
                keep_versions=settings.keep_versions,
                holder=f"dagster:{context.run.run_id}",
            )
    except DatabaseUnavailable:
        raise
    except IngestError as exc:  # a failed listing, a source held by another sync, an unknown source
        raise dg.Failure(description=f"sync of {name} failed: {exc}") from None
    metadata: dict[str, Any] = {change: report.counts[change] for change in COUNTED}
    metadata.update(
        source=report.source,
        collection=report.collection,
        batch_id=str(report.batch_id) if report.batch_id else "",
        bytes_read=report.bytes_read,
    )
    if report.deletes_skipped:
        metadata["deletes_skipped"] = report.deletes_skipped
    if report.passed_over:  # the files its globs (or, without any, their suffixes) did not take
        metadata["skipped"] = str(report.passed_over)
    return dg.MaterializeResult(metadata=metadata)


sync_source_job = dg.define_asset_job(
    "sync_source",
    selection=[source_sync],
    description="Sync one registered source (its partition); sync_source_sensor runs it on each source's interval.",
)


def registered_sources(database: DatabaseResource) -> list[SyncSource] | dg.SkipReason:
    try:
        with database.rpc() as rpc:
            return rpc.sync_sources()
    except DatabaseUnavailable:
        raise
    except IngestError as exc:  # e.g. pending migrations
        return dg.SkipReason(f"the ingestion database is not ready: {exc}")


def run_key(source: SyncSource) -> str:
    """Dagster drops a repeated run key forever. The key names the source's row (a source
    removed and added again is a new row), its last sync's start (a sync moves it), and the
    interval the tick falls in: a run still queued within its interval is not asked for
    twice, and a run that failed before its sync began is asked for again an interval later."""
    interval = (source.every_minutes or 1) * 60
    period = int(time.time() // interval)
    started = source.last_started_at.isoformat() if source.last_started_at else "never"
    return f"{source.name}:{source.created_at.isoformat()}:{started}:{period}"


@dg.sensor(
    job=sync_source_job,
    minimum_interval_seconds=SETTINGS.source_sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps source_sync's partitions equal to the registered sources and syncs each one whose "
    "interval (ingest source add --every) has passed.",
)
def sync_source_sensor(
    context: dg.SensorEvaluationContext, database: DatabaseResource
) -> dg.SensorResult | dg.SkipReason:
    sources = registered_sources(database)
    if isinstance(sources, dg.SkipReason):
        return sources
    names = {source.name for source in sources}
    known = set(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS.name or "sync_sources"))
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if names - known:
        requests.append(SOURCE_PARTITIONS.build_add_request(sorted(names - known)))
    if known - names:
        requests.append(SOURCE_PARTITIONS.build_delete_request(sorted(known - names)))
    runs = [dg.RunRequest(partition_key=source.name, run_key=run_key(source)) for source in sources if source.due]
    if not runs and not requests:
        return dg.SkipReason(f"{len(sources)} registered source(s), none due")
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=requests)
