"""The code location loads and holds what the UI should list."""

import os
import subprocess
import sys
from pathlib import Path

from ingestion_pipeline.definitions import defs

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate_passes(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    result = subprocess.run([str(Path(sys.executable).parent / "dagster"), "definitions", "validate",
                             "-w", "workspace.yaml"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed validation" in result.stdout + result.stderr


def test_definitions_hold_the_jobs_sensors_and_schedule():
    repository = defs.get_repository_def()
    assert {job.name for job in repository.get_all_jobs()} >= {"ingest_documents", "refresh_batch_status",
                                                                "janitor"}
    assert {sensor.name for sensor in repository.sensor_defs} == {"import_batch_sensor", "batch_status_sensor"}
    assert [schedule.name for schedule in repository.schedule_defs] == ["janitor_schedule"]
