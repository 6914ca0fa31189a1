"""The worker: claim -> heartbeat -> build generation -> commit -> complete | fail_or_retry.

No Dagster here: the same code runs from Dagster ops, from `ingest work`, and from tests.
"""

from ingestion_pipeline.worker.loop import Worker
from ingestion_pipeline.worker.outcome import JobResult, Outcome
from ingestion_pipeline.worker.report import WorkerReport

__all__ = ["JobResult", "Outcome", "Worker", "WorkerReport"]
