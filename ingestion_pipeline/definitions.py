"""The Dagster code location (workspace.yaml points here): everything assembled in one place."""

import dagster as dg

from ingestion_pipeline.orchestration.jobs import ingest_documents, janitor, refresh_batch_status
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from ingestion_pipeline.orchestration.schedules import janitor_schedule
from ingestion_pipeline.orchestration.sensors import batch_status_sensor, import_batch_sensor
from ingestion_pipeline.settings import get_settings

defs = dg.Definitions(
    jobs=[ingest_documents, refresh_batch_status, janitor],
    sensors=[import_batch_sensor, batch_status_sensor],
    schedules=[janitor_schedule],
    resources={
        "database": DatabaseResource(),
        "processing": ProcessingResource(embedder=get_settings().embedder),
    },
)
