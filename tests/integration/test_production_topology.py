"""Production topology: the connection budget checked at start, a pooler recognised, and
Dagster's resources and sensors working through a transaction-mode pooler while Dagster's
own storage is kept off it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from ingestion_pipeline.db.connection import connect, through_pooler
from ingestion_pipeline.definitions import make_definitions
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.orchestration import instance as dagster_instance
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from ingestion_pipeline.orchestration.sensors import import_batch_sensor
from tests.helpers import batch, seed_batch, seed_job

pytestmark = pytest.mark.pooler

INGEST = Path(sys.executable).with_name("ingest")


def test_a_pooler_is_recognised_and_a_direct_connection_is_not(pooler, db_url):
    with connect(db_url) as direct, connect(pooler.url()) as pooled:
        assert (through_pooler(direct), through_pooler(pooled)) == (False, True)


def test_a_worker_with_more_connections_than_the_server_allows_refuses_in_one_line(db_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    env.update(DATABASE_URL=db_url, INGEST_POOL_MAX_SIZE="100000")
    done = subprocess.run(
        [str(INGEST), "work", "--drain"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        "ingest: error: not enough database connections: this process may open 100000 "
        "(INGEST_POOL_MAX_SIZE) but the server has "
    )


def test_through_a_pooler_the_budget_is_the_poolers(pooler, db_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    env.update(DATABASE_URL=pooler.url(), INGEST_POOL_MAX_SIZE="150")  # more than the server's 100 slots
    done = subprocess.run(
        [str(INGEST), "work", "--drain"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_dagster_sensor_drain_and_checks_through_the_pooler(pooler, conn):
    batch_id = seed_batch(conn)
    for _ in range(6):
        seed_job(conn, batch_id)
    definitions = make_definitions(DatabaseResource(database_url=pooler.url()), ProcessingResource())
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(
            instance=instance, resources={"database": DatabaseResource(database_url=pooler.url())}
        )
        request = import_batch_sensor(context).run_requests[0]
        drained = definitions.resolve_job_def("ingest_documents").execute_in_process(
            instance=instance, run_config=request.run_config
        )
        checked = definitions.resolve_job_def("check_document_index").execute_in_process(instance=instance)
    assert drained.success and checked.success
    [materialization] = drained.asset_materializations_for_node("document_index")
    assert materialization.metadata["run_claimed"].value == 6
    assert batch(conn, batch_id)["status"] in ("completed", "completed_with_errors")
    evaluations = [e.event_specific_data for e in checked.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert len(evaluations) == 10 and all(e.passed for e in evaluations)  # the ten checks of document_index


def test_dagster_storage_is_refused_through_a_pooler_and_uses_the_direct_url(
    pooler, db_url, monkeypatch, dagster_database
):
    for name in ("DAGSTER_PG_URL", "INGEST_DIRECT_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", pooler.url())
    dagster_instance._resolved.clear()
    with pytest.raises(IngestError, match="INGEST_DIRECT_DATABASE_URL"):
        dagster_instance.dagster_storage_url()

    monkeypatch.setenv("INGEST_DIRECT_DATABASE_URL", db_url)
    url = dagster_instance.dagster_storage_url()
    assert url.startswith("postgresql+psycopg2://") and url.split("?")[0].endswith("/dagster")
