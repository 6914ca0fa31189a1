"""The drain job and the janitor, executed in process against a real database."""

import shutil
from pathlib import Path

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.jobs import ingest_documents, janitor, refresh_batch_status
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

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def step_metadata(result, step: str) -> dict:
    [output] = [e for e in result.all_node_events if e.step_key == step and e.event_type_value == "STEP_OUTPUT"]
    return {key: value.value for key, value in output.event_specific_data.metadata.items()}


def test_drain_job_completes_a_real_batch(instance, resources, pool, conn, tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(SAMPLES, folder)
    (folder / "empty.txt").write_bytes(b"")  # one bad document must not fail the run
    report = enqueue_paths(pool, [folder], max_bytes=10_000_000)

    result = ingest_documents.execute_in_process(instance=instance, resources=resources)

    assert result.success
    summary = result.output_for_node("drain_queue")
    assert (summary["claimed"], summary["completed"], summary["failed"]) == (5, 4, 1)
    metadata = step_metadata(result, "drain_queue")
    assert metadata["completed"] == 4 and metadata["lease_lost"] == 0 and "docs_per_second" in metadata
    assert batch(conn, report.batch_id)["status"] == "completed_with_errors"


def test_drain_job_fails_clearly_when_the_database_is_down(instance):
    down = {"database": DatabaseResource(database_url="postgresql://postgres@127.0.0.1:1/nope"),
            "processing": ProcessingResource()}
    result = ingest_documents.execute_in_process(instance=instance, resources=down, raise_on_error=False)
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
        "select count(*) as n from document_chunks where index_generation_id = %s", (generation,)).fetchone()["n"]
    assert left(abandoned["idle"][1]) == 0
    assert left(abandoned["busy"][1]) == 3
    assert document(conn, abandoned["busy"][0])["status"] == "indexed"
    assert step_metadata(result, "expire_stale_leases")["expired"] == 1
    assert step_metadata(result, "cleanup_abandoned_generations")["generations"] == 1
