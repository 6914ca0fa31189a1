"""The drain job (a materialization of document_index), its checks and the janitor,
executed in process against a real database."""

import shutil
from pathlib import Path

import dagster as dg

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.health import DESCRIPTIONS, WARNINGS
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.assets import FAILED_DOCUMENTS_TAG
from ingestion_pipeline.orchestration.jobs import janitor, refresh_batch_status
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from tests.helpers import (
    batch,
    document,
    index_document,
    job,
    make_lease_stale,
    seed_batch,
    seed_job,
    start_reindex_build,
)
from tests.orchestration.in_process import check_evaluations, check_results, resolved_job

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def step_metadata(result, step: str) -> dict:
    [output] = [e for e in result.all_node_events if e.step_key == step and e.event_type_value == "STEP_OUTPUT"]
    return {key: value.value for key, value in output.event_specific_data.metadata.items()}


def test_drain_job_completes_a_real_batch(instance, resources, pool, conn, tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(SAMPLES, folder)
    (folder / "empty.txt").write_bytes(b"")  # one bad document must not fail the run
    report = enqueue_paths(pool, [folder], max_bytes=10_000_000)

    result = resolved_job("ingest_documents", resources).execute_in_process(instance=instance)

    assert result.success
    [materialization] = result.asset_materializations_for_node("document_index")
    metadata = {key: value.value for key, value in materialization.metadata.items()}
    assert (metadata["run_claimed"], metadata["run_indexed"], metadata["run_failed"]) == (5, 4, 1)
    assert metadata["run_lease_lost"] == 0 and metadata["run_batches_touched"] == 1 and metadata["run_chunks"] > 0
    assert "docs_per_second" in metadata
    assert instance.get_latest_materialization_event(materialization.asset_key) is not None
    assert batch(conn, report.batch_id)["status"] == "completed_with_errors"
    # the index's totals, as the database holds them (the same read as `ingest status`)
    assert index_totals_of(conn) == {key: metadata[key] for key in index_totals_of(conn)}
    assert (metadata["documents"], metadata["documents_indexed"], metadata["documents_failed"]) == (5, 4, 1)
    assert metadata["documents_queued"] == 0 and metadata["collections"] == 1 and metadata["sources"] == 0
    assert "empty.txt" in metadata["run_failures"]
    # the run is marked by its tag; the checks ran in it, the failed document a warning (WARN)
    assert instance.get_run_by_id(result.run_id).tags[FAILED_DOCUMENTS_TAG] == "1"
    evaluations = {e.check_name: e for e in check_evaluations(result)}
    assert set(evaluations) == set(DESCRIPTIONS)
    warned = evaluations.pop("no_failed_documents")
    assert (warned.passed, warned.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert warned.description.startswith("1 document(s) failed to index: `ingest status` lists them")
    assert warned.metadata["failed_documents"].value == 1
    assert all(e.passed and e.severity == dg.AssetCheckSeverity.ERROR for e in evaluations.values())


def test_a_drain_run_without_failures_is_not_marked(instance, resources, pool, tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(SAMPLES, folder)
    enqueue_paths(pool, [folder], max_bytes=10_000_000)

    result = resolved_job("ingest_documents", resources).execute_in_process(instance=instance)

    assert FAILED_DOCUMENTS_TAG not in instance.get_run_by_id(result.run_id).tags
    evaluations = {e.check_name: e for e in check_evaluations(result)}
    assert set(evaluations) == set(DESCRIPTIONS) and all(e.passed for e in evaluations.values())
    assert evaluations["no_failed_documents"].description == "no failed document"


def index_totals_of(conn) -> dict[str, int]:
    """The totals counted here from the rows, as the metadata names them."""
    rows = conn.execute("select status, count(*) as n from documents where deleted_at is null group by status")
    by_status = {row["status"]: row["n"] for row in rows}
    return {
        "documents": sum(by_status.values()),
        **{f"documents_{status}": count for status, count in by_status.items()},
        "chunks": conn.execute(
            "select count(*) from documents d join document_chunks c "
            "on c.document_id = d.id and c.index_generation_id = d.index_generation_id where d.deleted_at is null"
        ).fetchone()["count"],
        "failed_jobs": conn.execute("select count(*) from ingestion_jobs where status = 'failed'").fetchone()["count"],
    }


def test_drain_job_fails_clearly_when_the_database_is_down(instance):
    down = {
        "database": DatabaseResource(database_url="postgresql://postgres@127.0.0.1:1/nope"),
        "processing": ProcessingResource(),
    }
    result = resolved_job("ingest_documents", down).execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "ingestion database unavailable" in failure.event_specific_data.error.message


def test_refresh_job_heals_a_batch_left_processing(instance, resources, conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    index_document(rpc, conn)
    conn.execute("update import_batches set status = 'processing' where id = %s", (batch_id,))

    result = refresh_batch_status.execute_in_process(instance=instance, resources=resources)
    assert result.success
    assert batch(conn, batch_id)["status"] == "completed"


def test_janitor_expires_refreshes_and_cleans_but_spares_open_documents(instance, resources, conn):
    rpc = IngestionRpc(conn)
    # A stale lease on a job with no attempts left.
    dead_batch = seed_batch(conn)
    _, dead_job = seed_job(conn, dead_batch, max_attempts=1)
    rpc.claim("crashed-worker")
    make_lease_stale(conn, dead_job)
    # Two indexed documents, each with an abandoned build; the second has an open job.
    abandoned = {}
    for name in ("idle", "busy"):
        seed_job(conn)
        document_id, _ = index_document(rpc, conn)
        reindex, generation = start_reindex_build(rpc, conn, document_id, "worker")
        rpc.fail_or_retry(reindex.job_id, document_id, worker_id="worker", error_message="crash")
        abandoned[name] = (document_id, generation)
    rpc.enqueue(abandoned["busy"][0], kind="reindex")  # open job: its rows are off limits

    result = janitor.execute_in_process(instance=instance, resources=resources)

    assert result.success
    assert job(conn, dead_job)["status"] == "failed"
    assert batch(conn, dead_batch)["status"] == "completed_with_errors"
    left = lambda generation: conn.execute(  # noqa: E731
        "select count(*) as n from document_chunks where index_generation_id = %s", (generation,)
    ).fetchone()["n"]
    assert left(abandoned["idle"][1]) == 0
    assert left(abandoned["busy"][1]) == 3
    assert document(conn, abandoned["busy"][0])["status"] == "indexed"
    assert step_metadata(result, "expire_stale_leases")["expired"] == 1
    assert step_metadata(result, "cleanup_abandoned_generations")["generations"] == 1
    # its last step reports the asset checks: all pass once the janitor has done its work
    reported = check_results(result)
    # the job it dead-lettered failed its document: a warning, which fails nothing
    assert reported.pop("no_failed_documents")[0] is False
    assert reported == {name: (True, reported[name][1]) for name in DESCRIPTIONS if name not in WARNINGS}


def test_checks_job_reports_a_stale_lease_in_the_words_of_ingest_health(instance, resources, conn, db_url):
    from ingestion_pipeline.cli import main as ingest

    checks = resolved_job("check_document_index", resources)
    healthy = check_results(checks.execute_in_process(instance=instance))
    assert set(healthy) == set(DESCRIPTIONS) and all(passed for passed, _ in healthy.values())

    _, job_id = seed_job(conn)
    IngestionRpc(conn).claim("worker-1")
    make_lease_stale(conn, job_id)
    sick = check_results(checks.execute_in_process(instance=instance))
    passed, message = sick["no_stale_leases"]
    assert not passed and message.startswith("1 job(s) hold a lease past its deadline")
    assert all(passed for name, (passed, _) in sick.items() if name != "no_stale_leases")
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [next(iter(checks.asset_layer.asset_graph.asset_check_keys))]
    )
    assert record  # stored, so the UI shows it

    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert ingest(["health", "--database-url", db_url]) == 1
    assert f"needs action: {message}" in out.getvalue()


def test_drain_job_claims_within_its_job_budget_and_logs_progress(
    instance, resources, pool, conn, tmp_path, monkeypatch
):
    monkeypatch.setenv("INGEST_DRAIN_JOBS_PER_RUN", "2")
    monkeypatch.setattr("ingestion_pipeline.orchestration.assets.PROGRESS_EVERY_SECONDS", 0.0)
    folder = tmp_path / "docs"
    shutil.copytree(SAMPLES, folder)
    enqueue_paths(pool, [folder], max_bytes=10_000_000)

    result = resolved_job("ingest_documents", resources).execute_in_process(instance=instance)
    [materialization] = result.asset_materializations_for_node("document_index")
    assert materialization.metadata["run_claimed"].value == 2
    pending = conn.execute("select count(*) as n from ingestion_jobs where status = 'pending'").fetchone()["n"]
    assert pending == 2  # left for the next run the sensor starts
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any("draining: at most 2 job(s)" in message for message in messages)
    assert any("progress: indexed" in message for message in messages)

    overridden = resolved_job("ingest_documents", resources).execute_in_process(
        instance=instance, run_config={"ops": {"document_index": {"config": {"max_jobs": 10}}}}
    )
    [materialization] = overridden.asset_materializations_for_node("document_index")
    assert materialization.metadata["run_claimed"].value == 2


def test_drain_runs_share_the_parsing_children():
    from ingestion_pipeline.orchestration.assets import parse_processes_per_run
    from ingestion_pipeline.settings import Settings

    def share(parse_processes: int, max_drain_runs: int) -> int:
        return parse_processes_per_run(Settings(parse_processes=parse_processes, max_drain_runs=max_drain_runs))

    assert (share(8, 2), share(2, 2), share(1, 4), share(0, 4)) == (4, 1, 1, 0)
