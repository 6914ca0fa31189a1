"""Dagster's project tooling on this checkout, with no environment set but a scratch data
folder: `dg check defs`, `dg list defs --json`, `dg launch`, and `dg dev` serving the
location (pyproject.toml declares the project for `dg` and for `dagster dev`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from ingestion_pipeline.db import embedded
from tests.orchestration.live_dagster import BIN, ROOT, LiveDagster, clean_env

CHECKS = {
    "schema_matches_migrations",
    "no_stuck_batches",
    "counts_match_rows",
    "no_stale_leases",
    "pending_jobs_fresh",
    "no_duplicate_documents",
    "vectors_present",
    "one_embedder",
    "vector_index_present",
    "no_failed_documents",  # a warning (WARN): failed documents
}


@pytest.fixture
def env(tmp_path):
    yield clean_env(tmp_path / "data")
    embedded.stop(tmp_path / "data")


def dg(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dg"), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_dg_check_defs_and_list_defs_show_the_asset_its_checks_jobs_sensors_and_schedule(env):
    checked = dg("check", "defs", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr
    assert "virtual environment" not in checked.stdout + checked.stderr  # the venv warning is off

    listed = dg("list", "defs", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    defs = json.loads(listed.stdout)
    assert [asset["asset_key"] for asset in defs["assets"]] == ["document_index", "source_sync"]
    assert {check["name"] for check in defs["asset_checks"]} == CHECKS
    assert {check["asset_key"] for check in defs["asset_checks"]} == {"document_index"}
    assert {job["name"] for job in defs["jobs"]} == {
        "ingest_documents",
        "check_document_index",
        "janitor",
        "refresh_batch_status",
        "delete_documents",
        "cancel_import_batch",
        "retry_failed_jobs",
        "sync_source",
    }
    assert {sensor["name"] for sensor in defs["sensors"]} == {
        "import_batch_sensor",
        "batch_status_sensor",
        "index_totals_sensor",
        "failed_drain_run_sensor",
        "sync_source_sensor",
    }
    assert [schedule["name"] for schedule in defs["schedules"]] == ["janitor_schedule"]


def test_dg_launch_materializes_document_index(env, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "note.md").write_text("# Note\n\nLaunched through dg.\n")
    migrated = subprocess.run(
        [str(BIN / "ingest"), "db", "migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert migrated.returncode == 0, migrated.stderr
    enqueued = subprocess.run(
        [str(BIN / "ingest"), "enqueue", str(folder)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert enqueued.returncode == 0, enqueued.stderr
    launched = dg("launch", "--assets", "document_index", env=env)
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    status = subprocess.run(
        [str(BIN / "ingest"), "status", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    [batch] = json.loads(status.stdout)["batches"]
    assert (batch["status"], batch["completed"]) == ("completed", 1)


def test_dg_dev_serves_the_location(tmp_path):
    env = clean_env(tmp_path / "data")
    live = LiveDagster.start([str(BIN / "dg"), "dev"], env=env, log_path=tmp_path / "dg-dev.log")
    try:
        repository = live.repository()
        assert [node["assetKey"]["path"] for node in repository["assetNodes"]] == [["document_index"], ["source_sync"]]
        assert {s["name"] for s in repository["sensors"]} >= {"import_batch_sensor", "batch_status_sensor"}
    finally:
        os.killpg(live.proc.pid, signal.SIGINT)
        try:
            live.proc.wait(timeout=60)
        finally:
            live.kill_everything()
            embedded.stop(tmp_path / "data")
    assert "SupersessionWarning" not in live.log_tail(100_000)
