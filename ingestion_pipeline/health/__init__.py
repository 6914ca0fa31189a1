"""The index's health checks: what `ingest health` prints (cli/operations.py) and Dagster
shows as the asset checks of `document_index` (orchestration/checks.py), with the same name
and one-line message in both places.

Each check reads; none repairs. The janitor repairs what it can (stale leases, stuck and
drifted batches); drift and count mismatches need a person. Imports point one way: this
runner over queue.py (schema and queue) and vectors.py (the vectors), both over check.py
(IndexCheck and every check's description).
"""

from __future__ import annotations

from ingestion_pipeline.db.models import QueueHealth
from ingestion_pipeline.health.check import DESCRIPTIONS, IndexCheck
from ingestion_pipeline.health.queue import queue_checks, schema_check
from ingestion_pipeline.health.vectors import vector_checks
from ingestion_pipeline.settings import Settings, load_settings

__all__ = ["DESCRIPTIONS", "IndexCheck", "queue_checks", "run_index_checks", "schema_check", "vector_checks"]


def run_index_checks(
    url: str, health: QueueHealth, max_pending_age_seconds: int, settings: Settings | None = None
) -> list[IndexCheck]:
    """Every check, in DESCRIPTIONS order; the vector checks compare the index with
    `settings`' embedder (None: the settings of the environment)."""
    return [
        schema_check(url),
        *queue_checks(health, max_pending_age_seconds),
        *vector_checks(url, settings or load_settings()),
    ]
