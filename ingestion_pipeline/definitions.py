"""The Dagster code location (workspace.yaml points here): everything assembled in one place."""

import dagster as dg

from ingestion_pipeline.orchestration.assets import document_index
from ingestion_pipeline.orchestration.checks import document_index_checks
from ingestion_pipeline.orchestration.jobs import (
    check_document_index,
    ingest_documents,
    janitor,
    refresh_batch_status,
)
from ingestion_pipeline.orchestration.lifecycle import LIFECYCLE_JOBS
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from ingestion_pipeline.orchestration.schedules import janitor_schedule
from ingestion_pipeline.orchestration.sensors import (
    batch_status_sensor,
    failed_drain_run_sensor,
    import_batch_sensor,
    index_totals_sensor,
)
from ingestion_pipeline.orchestration.sources import source_sync, sync_source_job, sync_source_sensor


def make_definitions(
    database: DatabaseResource | None = None, processing: ProcessingResource | None = None
) -> dg.Definitions:
    """The location's definitions; `ingest demo` and the tests bind their own resources."""
    return dg.Definitions(
        assets=[document_index, source_sync],
        asset_checks=[document_index_checks],
        jobs=[ingest_documents, check_document_index, refresh_batch_status, janitor, sync_source_job, *LIFECYCLE_JOBS],
        sensors=[
            import_batch_sensor,
            batch_status_sensor,
            index_totals_sensor,
            failed_drain_run_sensor,
            sync_source_sensor,
        ],
        schedules=[janitor_schedule],
        resources={
            "database": database or DatabaseResource(),
            "processing": processing or ProcessingResource(),
            # Op outputs (the janitor's counts) stay in the run's memory: the fs default would
            # write a file per op and run under Dagster's home, kept now, never cleaned.
            "io_manager": dg.mem_io_manager,
        },
        # Every job's ops run in its run worker: they are short database calls, and the
        # multiprocess default started a Python process per op (seconds each on busy cores)
        # that a stop of `ingest ui` then had to wait for.
        executor=dg.in_process_executor,
    )


defs = make_definitions()
