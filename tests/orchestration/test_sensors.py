"""Sensors and the schedule, evaluated with build_sensor_context / build_schedule_context."""

import dagster as dg
import pytest

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.jobs import ingest_documents, refresh_batch_status
from ingestion_pipeline.orchestration.schedules import janitor_schedule
from ingestion_pipeline.orchestration.sensors import (
    batch_status_sensor,
    failed_drain_run_sensor,
    import_batch_sensor,
    index_totals_sensor,
)
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from tests.helpers import batch, index_document, index_folder, seed_batch, seed_job
from tests.orchestration.in_process import resolved_job


def tick(sensor, instance, resources, cursor=None):
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    return sensor(context)


def test_batch_sensor_skips_when_nothing_is_claimable(instance, resources):
    result = tick(import_batch_sensor, instance, resources)
    assert isinstance(result, dg.SkipReason)
    assert "nothing claimable" in result.skip_message


def test_batch_sensor_requests_runs_scaled_by_depth_and_advances_its_cursor(instance, resources, conn, monkeypatch):
    monkeypatch.setenv("INGEST_DRAIN_BACKLOG_PER_RUN", "2")
    monkeypatch.setenv("INGEST_MAX_DRAIN_RUNS", "3")
    monkeypatch.setenv("INGEST_DRAIN_RUN_SECONDS", "120")
    monkeypatch.setenv("INGEST_STALE_AFTER_SECONDS", "90")
    batch_id = seed_batch(conn)
    for _ in range(5):
        seed_job(conn, batch_id)

    first = tick(import_batch_sensor, instance, resources)
    assert [r.run_key for r in first.run_requests] == ["drain-1-0", "drain-1-1", "drain-1-2"]  # ceil(5/2), cap 3
    assert first.cursor == "1"
    # The runs drain with the settings' budgets; Dagster fails one that outlives them by a lease.
    assert not first.run_requests[0].run_config
    assert first.run_requests[0].tags == {
        "ingestion/drain": "true",
        "dagster/max_runtime": "210",
        "ingestion/claimable": "5",
    }

    again = tick(import_batch_sensor, instance, resources, cursor=None)
    assert [r.run_key for r in again.run_requests] == [r.run_key for r in first.run_requests]  # same tick: same keys
    second = tick(import_batch_sensor, instance, resources, cursor=first.cursor)
    assert second.cursor == "2"
    assert {r.run_key for r in second.run_requests}.isdisjoint({r.run_key for r in first.run_requests})


def test_batch_sensor_starts_one_run_for_a_small_backlog(instance, resources, conn, monkeypatch):
    monkeypatch.setenv("INGEST_MAX_DRAIN_RUNS", "4")
    for _ in range(3):
        seed_job(conn)
    assert len(tick(import_batch_sensor, instance, resources).run_requests) == 1  # default: a run per 250


def test_batch_sensor_does_not_duplicate_active_drain_runs(instance, resources, conn, monkeypatch):
    monkeypatch.setenv("INGEST_MAX_DRAIN_RUNS", "2")
    seed_job(conn)
    for _ in range(2):
        instance.add_run(dg.DagsterRun(job_name=ingest_documents.name, status=dg.DagsterRunStatus.STARTED))

    result = tick(import_batch_sensor, instance, resources, cursor="7")
    assert isinstance(result, dg.SkipReason)
    assert "2 drain run(s) already active" in result.skip_message


def test_batch_status_sensor_heals_a_batch_left_processing(instance, resources, conn):
    assert isinstance(tick(batch_status_sensor, instance, resources), dg.SkipReason)
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    index_document(rpc, conn)
    conn.execute("update import_batches set status = 'processing' where id = %s", (batch_id,))

    result = tick(batch_status_sensor, instance, resources)
    [request] = result.run_requests
    assert request.run_config["ops"]["refresh_batches"]["config"]["batch_ids"] == [str(batch_id)]
    assert result.cursor == "1"

    run = refresh_batch_status.execute_in_process(run_config=request.run_config, instance=instance, resources=resources)
    assert run.success
    assert batch(conn, batch_id)["status"] == "completed"
    assert isinstance(tick(batch_status_sensor, instance, resources, cursor="1"), dg.SkipReason)


@pytest.mark.parametrize(
    ("minute", "next_tick"), [(0, (3, 0)), (5, (3, 10)), (10, (3, 10)), (50, (3, 50)), (51, (4, 0)), (59, (4, 0))]
)
def test_janitor_schedule_runs_the_janitor_every_ten_minutes(instance, minute, next_tick):
    """From 03:`minute` the schedule's next tick, as the Dagster daemon computes it from the
    cron string, is the next minute divisible by ten (that minute itself when it is one);
    a tick evaluates to one run of the janitor job."""
    import datetime

    from dagster._utils.schedules import cron_string_iterator

    assert janitor_schedule.job_name == "janitor"
    assert janitor_schedule.cron_schedule == "*/10 * * * *"
    when = datetime.datetime(2026, 11, 30, 3, minute, tzinfo=datetime.UTC)
    ticks = cron_string_iterator(
        (when - datetime.timedelta(seconds=1)).timestamp(),
        janitor_schedule.cron_schedule,
        janitor_schedule.execution_timezone or "UTC",
    )
    first, second = next(ticks), next(ticks)
    assert (first.hour, first.minute) == next_tick
    assert second - first == datetime.timedelta(minutes=10)

    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=first)
    [request] = janitor_schedule.evaluate_tick(context).run_requests
    assert request.job_name in (None, janitor_schedule.job_name)


def test_a_failed_drain_run_is_recorded_on_the_asset(instance):
    from ingestion_pipeline.definitions import make_definitions
    from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource

    down = make_definitions(
        DatabaseResource(database_url="postgresql://postgres@127.0.0.1:1/nope"), ProcessingResource()
    ).resolve_job_def("ingest_documents")
    result = down.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "PIPELINE_FAILURE"]

    context = dg.build_run_status_sensor_context(
        sensor_name=failed_drain_run_sensor.name,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=failure,
    ).for_run_failure()
    failed_drain_run_sensor(context)

    [record] = instance.fetch_observations(dg.AssetKey("document_index"), limit=10).records
    observation = record.asset_observation
    assert observation.metadata["failed_run_id"].value == result.run_id
    assert f"drain run {result.run_id[:8]} failed" in observation.description


def test_index_sensor_reports_a_drain_by_ingest_work_and_requests_the_checks(
    instance, resources, conn, db_url, tmp_path
):
    assert tick(index_totals_sensor, instance, resources).skip_message == "nothing drained yet"
    (tmp_path / "docs").mkdir()
    for name in ("heron", "egret"):
        (tmp_path / "docs" / f"{name}.txt").write_text(f"A {name} stands in the shallows.\n")
    (tmp_path / "docs" / "empty.txt").write_bytes(b"")  # fails: a failure is a total too
    index_folder(tmp_path / "docs", db_url)  # `ingest enqueue` and `ingest work --drain`: no Dagster run

    result = tick(index_totals_sensor, instance, resources)
    [event] = result.asset_events
    assert isinstance(event, dg.AssetMaterialization) and event.asset_key == dg.AssetKey("document_index")
    metadata = {key: value.value for key, value in event.metadata.items()}
    chunks = conn.execute("select count(*) as n from document_chunks").fetchone()["n"]
    assert (metadata["documents"], metadata["documents_indexed"], metadata["documents_failed"]) == (3, 2, 1)
    assert (metadata["chunks"], metadata["failed_jobs"], metadata["jobs_finished"]) == (chunks, 1, 3)
    assert metadata["reported_by"] == "index_totals_sensor"
    # its checks ran for an earlier materialization (or never): a check run is requested, once per drain
    [request] = result.run_requests
    assert request.run_key.startswith("checks-3@")
    assert index_totals_sensor.job_name == "check_document_index"

    # what the daemon does with the event; then the asset shows the index as it is
    instance.report_runless_asset_event(event)
    again = tick(index_totals_sensor, instance, resources)
    assert again.skip_message == "document_index shows the index as it is: 3 document(s), " + f"{chunks} chunk(s)"


def test_index_sensor_leaves_drain_runs_to_record_the_totals(instance, resources, pool, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "heron.txt").write_text("A grey heron stands in the shallows.\n")
    enqueue_paths(pool, [tmp_path / "docs"], max_bytes=10_000_000)
    resolved_job("ingest_documents", resources).execute_in_process(instance=instance)
    # the run's materialization recorded the totals it left: nothing to report
    assert tick(index_totals_sensor, instance, resources).skip_message.startswith(
        "document_index shows the index as it is: 1 document(s)"
    )

    (tmp_path / "docs" / "egret.txt").write_text("A little egret walks the mudflat.\n")
    enqueue_paths(pool, [tmp_path / "docs"], max_bytes=10_000_000)
    Worker(pool, load_settings()).run(drain=True)  # jobs finished outside Dagster ...
    instance.add_run(dg.DagsterRun(job_name=ingest_documents.name, status=dg.DagsterRunStatus.STARTED))
    # ... while a drain run is active: its materialization will record them
    result = tick(index_totals_sensor, instance, resources)
    assert result.skip_message == "1 drain run(s) active: their materializations will record the totals"


def test_sensors_skip_with_the_reason_when_the_database_is_not_migrated(instance, empty_db_url):
    """Plain `dagster dev` before `ingest db migrate`: each tick says what to do."""
    from ingestion_pipeline.orchestration.resources import DatabaseResource

    resources = {"database": DatabaseResource(database_url=empty_db_url)}
    for sensor in (import_batch_sensor, batch_status_sensor, index_totals_sensor):
        result = tick(sensor, instance, resources)
        assert isinstance(result, dg.SkipReason)
        assert "pending migration(s)" in result.skip_message and "ingest db migrate" in result.skip_message


def test_sensors_raise_when_the_database_is_down(instance):
    from ingestion_pipeline.errors import DatabaseUnavailable
    from ingestion_pipeline.orchestration.resources import DatabaseResource

    resources = {"database": DatabaseResource(database_url="postgresql://postgres@127.0.0.1:1/nope")}
    for sensor in (import_batch_sensor, index_totals_sensor):
        with pytest.raises(DatabaseUnavailable):
            tick(sensor, instance, resources)
