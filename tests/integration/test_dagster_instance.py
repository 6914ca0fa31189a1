"""Dagster's own storage, as the checkout's dagster.yaml configures it: a DAGSTER_PG_URL in
any form users write works, and without one a `dagster` database is created on the
pipeline's server."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import dagster as dg
import psycopg
import pytest
from dagster._core.instance.ref import InstanceRef

from ingestion_pipeline.orchestration import instance as dagster_instance
from ingestion_pipeline.orchestration.instance import DAGSTER_DATABASE, normalise_url

ROOT = Path(__file__).resolve().parents[2]


def forms_of(url: str) -> list[str]:
    """The ways a user writes one PostgreSQL URL."""
    rest = url.split("://", 1)[1]
    parts = psycopg.conninfo.conninfo_to_dict(url)
    key_value = " ".join(f"{key}={value}" for key, value in parts.items())
    return [
        f"postgresql://{rest}",
        f"postgres://{rest}",
        f"postgresql+psycopg2://{rest}",
        f"postgresql+psycopg://{rest}",
        key_value,
    ]


def open_instance(tmp_path: Path) -> dg.DagsterInstance:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    shutil.copyfile(ROOT / "dagster.yaml", config / "dagster.yaml")
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path / "home"), config_dir=str(config)))


def test_every_form_of_a_url_names_the_same_database():
    url = "postgresql://u:p%40ss@db.example.com:6543/dagster_meta?sslmode=require"
    expected = normalise_url(url)
    assert expected.startswith("postgresql+psycopg2://u:p%40ss@db.example.com:6543/dagster_meta")
    assert {normalise_url(form) for form in forms_of(url)} == {expected}


@pytest.mark.parametrize("form", range(5))
def test_dagster_storage_works_with_each_form_of_dagster_pg_url(form, empty_db_url, tmp_path, monkeypatch):
    url = forms_of(empty_db_url)[form] if empty_db_url.startswith("postgresql://") else empty_db_url
    monkeypatch.setenv("DAGSTER_PG_URL", url)
    with open_instance(tmp_path) as instance:
        run = instance.add_run(dg.DagsterRun(job_name="probe", run_id=str(uuid.uuid4())))
        assert instance.get_run_by_id(run.run_id) is not None
    with psycopg.connect(empty_db_url) as conn:
        assert conn.execute("select count(*) from runs").fetchone()[0] == 1


def test_without_dagster_pg_url_a_dagster_database_is_made_on_the_pipeline_server(
    db_url, tmp_path, monkeypatch, dagster_database
):
    monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL", db_url)
    dagster_instance._resolved.clear()
    with open_instance(tmp_path) as instance:
        assert instance.get_runs_count() >= 0
    server = psycopg.conninfo.make_conninfo(db_url, dbname="postgres")
    with psycopg.connect(server) as conn:
        assert conn.execute("select 1 from pg_database where datname = %s", (DAGSTER_DATABASE,)).fetchone()


def test_runs_are_dequeued_every_second_and_monitored(empty_db_url, tmp_path, monkeypatch):
    """A new batch's first drain run waits at most a second in the queue, and a drain run
    whose worker died is failed by run monitoring (the default launcher cannot see it die)
    instead of counting as active forever."""
    monkeypatch.setenv("DAGSTER_PG_URL", empty_db_url)
    with open_instance(tmp_path) as instance:
        assert instance.run_coordinator.dequeue_interval_seconds == 1
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds > 0
