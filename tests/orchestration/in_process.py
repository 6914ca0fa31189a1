"""The project's Dagster jobs executed in process (`execute_in_process`) against the test
database, and what their results say."""

from __future__ import annotations

from ingestion_pipeline.definitions import make_definitions


def resolved_job(name: str, resources: dict):
    return make_definitions(resources["database"], resources["processing"]).resolve_job_def(name)


def check_evaluations(result) -> list:
    return [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]


def check_results(result) -> dict[str, tuple[bool, str]]:
    return {e.check_name: (e.passed, e.description) for e in check_evaluations(result)}
