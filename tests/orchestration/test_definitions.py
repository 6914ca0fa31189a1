"""The code location loads and holds what the UI should list."""

import subprocess
import sys
from pathlib import Path

from ingestion_pipeline.db import embedded
from ingestion_pipeline.definitions import defs
from ingestion_pipeline.health import DESCRIPTIONS
from tests.orchestration.live_dagster import clean_env

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate_passes_with_no_environment_set(tmp_path):
    # no DAGSTER_HOME, DAGSTER_PG_URL or DATABASE_URL: Dagster's storage is found the way
    # `ingest` finds its database (here a scratch embedded server)
    env = clean_env(tmp_path / "data")
    try:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        embedded.stop(tmp_path / "data")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed validation" in result.stdout + result.stderr


def test_definitions_hold_the_jobs_sensors_and_schedule():
    repository = defs.get_repository_def()
    assert {job.name for job in repository.get_all_jobs()} >= {
        "ingest_documents",
        "refresh_batch_status",
        "janitor",
        "check_document_index",
        "delete_documents",
        "cancel_import_batch",
        "retry_failed_jobs",
        "sync_source",
    }
    assert {sensor.name for sensor in repository.sensor_defs} == {
        "import_batch_sensor",
        "batch_status_sensor",
        "index_totals_sensor",
        "failed_drain_run_sensor",
        "sync_source_sensor",
    }
    assert [schedule.name for schedule in repository.schedule_defs] == ["janitor_schedule"]


def test_a_drain_run_is_one_process_with_a_runtime_limit():
    import dagster as dg

    from ingestion_pipeline.settings import get_settings

    job = defs.resolve_job_def("ingest_documents")
    assert job.executor_def is dg.in_process_executor  # no second process per run
    # the drain, then the checks of what it left (the check run: the same checks)
    index_checks = {key.name for key in job.asset_layer.asset_graph.asset_check_keys}
    assert index_checks == set(DESCRIPTIONS)  # every one evaluated by every check run
    checks = defs.resolve_job_def("check_document_index")
    assert {key.name for key in checks.asset_layer.asset_graph.asset_check_keys} == set(DESCRIPTIONS)
    settings = get_settings()
    assert job.tags["ingestion/drain"] == "true"
    assert job.tags["dagster/max_runtime"] == str(int(settings.drain_run_seconds + settings.stale_after_seconds))


def test_every_job_runs_its_ops_in_its_run_worker_and_keeps_their_outputs_in_memory():
    """One process per run (a Python start per op made stopping `ingest ui` wait), and no
    output files left under Dagster's home, which `ingest ui` keeps from one session to the next."""
    import dagster as dg

    for job in defs.resolve_all_job_defs():
        assert job.executor_def is dg.in_process_executor, job.name
        assert job.resource_defs["io_manager"] is dg.mem_io_manager, job.name
