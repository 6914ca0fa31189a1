"""Schedules: the janitor (default every 10 minutes; INGEST_JANITOR_CRON)."""

import dagster as dg

from ingestion_pipeline.orchestration.jobs import janitor
from ingestion_pipeline.settings import get_settings

janitor_schedule = dg.ScheduleDefinition(
    name="janitor_schedule",
    job=janitor,
    cron_schedule=get_settings().janitor_cron,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Expire stale leases, refresh stuck batches, clean abandoned generations, report the checks of "
    "document_index.",
)
