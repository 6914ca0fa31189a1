"""The index's health checks: what `ingest health` prints (cli/operations.py) and Dagster
shows as the asset checks of `document_index` (orchestration/checks.py), with the same name
and one-line message in both places.

Each check reads; none repairs. The janitor repairs what it can (stale leases, stuck and
drifted batches); drift and count mismatches need a person. Failed documents are a warning
(failures.py): said, never a failed health check. Imports point one way: this runner over
queue.py (schema and queue), vectors.py (the vectors) and failures.py, all over check.py
(IndexCheck, every check's description, which are warnings).
"""

from __future__ import annotations

from ingestion_pipeline.db.models import QueueHealth
from ingestion_pipeline.health.check import DESCRIPTIONS, WARNINGS, IndexCheck
from ingestion_pipeline.health.failures import failed_documents_check
from ingestion_pipeline.health.queue import queue_checks, schema_check
from ingestion_pipeline.health.vectors import vector_checks
from ingestion_pipeline.settings import Settings, load_settings

__all__ = [
    "DESCRIPTIONS",
    "WARNINGS",
    "IndexCheck",
    "failed_documents_check",
    "queue_checks",
    "run_index_checks",
    "schema_check",
    "vector_checks",
]


def run_index_checks(
    url: str, health: QueueHealth, max_pending_age_seconds: int, settings: Settings | None = None
) -> list[IndexCheck]:
    """Every check, in DESCRIPTIONS order; the vector checks compare the index with
    `settings`' embedder (None: the settings of the environment)."""
    return [
        schema_check(url),
        *queue_checks(health, max_pending_age_seconds),
        *vector_checks(url, settings or load_settings()),
        failed_documents_check(url),
    ]
