"""The lifecycle jobs (delete_documents, cancel_import_batch, retry_failed_jobs), executed in
process against a real database."""

import shutil
import uuid
from pathlib import Path

import pytest

from ingestion_pipeline.definitions import defs
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.lifecycle import cancel_import_batch, delete_documents, retry_failed_jobs
from ingestion_pipeline.worker import Worker
from tests.helpers import batch, document, job

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture
def enqueued(pool, settings, tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(SAMPLES, folder)
    (folder / "empty.txt").write_bytes(b"")  # fails for good
    return enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes, batch_name="samples")


@pytest.fixture
def drained(pool, settings, enqueued):
    assert Worker(pool, settings).run(drain=True).counts["failed"] == 1
    return enqueued


def document_id(report, name: str):
    [entry] = [f for f in report.files if Path(f.path).name == name]
    return entry.document_id


def run(job_def, instance, resources, op: str, config: dict):
    return job_def.execute_in_process(
        instance=instance, resources=resources, raise_on_error=False, run_config={"ops": {op: {"config": config}}}
    )


def metadata(result, op: str) -> dict:
    [output] = [e for e in result.all_node_events if e.step_key == op and e.event_type_value == "STEP_OUTPUT"]
    return {key: value.value for key, value in output.event_specific_data.metadata.items()}


def failure(result) -> str:
    assert not result.success
    [failed] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failed.event_specific_data
    description = error.user_failure_data.description if error.user_failure_data else error.error.message
    assert "\n" not in description.strip(), description
    return description


def test_the_jobs_are_in_the_code_location():
    names = {j.name for j in defs.get_repository_def().get_all_jobs()}
    assert {"delete_documents", "cancel_import_batch", "retry_failed_jobs"} <= names


def test_delete_documents_by_id_and_by_source(instance, resources, conn, drained):
    leases = document_id(drained, "postgres-leases.md")

    result = run(
        delete_documents,
        instance,
        resources,
        "delete_by_id_or_source",
        {"document_ids": [str(leases)], "source_names": ["tea-notes.txt", "no-such-file.txt"]},
    )

    assert result.success
    shown = metadata(result, "delete_by_id_or_source")
    assert (shown["deleted"], shown["refused"], shown["purged"], shown["in_flight"]) == (2, 1, 2, 0)
    assert {r.get("reason") for r in shown["results"] if not r["ok"]} == {"source_not_found"}
    assert document(conn, leases)["status"] == "deleted"
    assert document(conn, document_id(drained, "tea-notes.txt"))["status"] == "deleted"
    assert document(conn, document_id(drained, "river-otters.html"))["status"] == "indexed"

    again = run(delete_documents, instance, resources, "delete_by_id_or_source", {"document_ids": [str(leases)]})
    message = failure(again)
    assert message.startswith("nothing deleted") and "already deleted" in message


def test_delete_documents_by_key_in_a_collection(instance, resources, conn, drained):
    [otters] = [f for f in drained.files if Path(f.path).name == "river-otters.html"]
    elsewhere = {"source_keys": [otters.source_key], "collection": "another"}
    # a collection that does not exist is a typo, said as `ingest delete` says it (issue 48)
    assert failure(run(delete_documents, instance, resources, "delete_by_id_or_source", elsewhere)).startswith(
        "invalid config: no collection 'another': `ingest collection add another` creates it"
    )
    conn.execute("select add_collection('another')")
    assert "no live document has this key" in failure(
        run(delete_documents, instance, resources, "delete_by_id_or_source", elsewhere)
    )

    result = run(delete_documents, instance, resources, "delete_by_id_or_source", {"source_keys": [otters.source_key]})
    assert result.success
    shown = metadata(result, "delete_by_id_or_source")
    assert [(r["ok"], r["source_key"]) for r in shown["results"]] == [(True, otters.source_key)]
    assert document(conn, otters.document_id)["status"] == "deleted"


@pytest.mark.parametrize(
    "config, words",
    [
        ({}, "give document_ids, source_keys and/or source_names"),
        ({"source_keys": ["file:///nowhere/x.md"]}, "no live document has this key"),
        ({"document_ids": ["not-a-uuid"]}, "not a document id"),
        ({"document_ids": [str(uuid.UUID(int=7))]}, "no such document"),
        ({"source_names": ["nothing.txt"]}, "no live document has this name"),
    ],
)
def test_delete_documents_fails_when_nothing_matched_or_the_config_is_invalid(instance, resources, config, words):
    assert words in failure(run(delete_documents, instance, resources, "delete_by_id_or_source", config))


def test_cancel_import_batch(instance, resources, conn, enqueued):
    result = run(cancel_import_batch, instance, resources, "cancel_batch_jobs", {"batch_id": str(enqueued.batch_id)})

    assert result.success
    shown = metadata(result, "cancel_batch_jobs")
    assert (shown["cancelled"], shown["in_flight"], shown["status"], len(shown["job_ids"])) == (5, 0, "cancelled", 5)
    assert batch(conn, enqueued.batch_id)["status"] == "cancelled"
    assert {job(conn, j)["status"] for j in shown["job_ids"]} == {"cancelled"}

    # Nothing open any more: the run succeeds and says so (the batch stays cancelled).
    again = run(cancel_import_batch, instance, resources, "cancel_batch_jobs", {"batch_id": str(enqueued.batch_id)})
    assert again.success
    shown = metadata(again, "cancel_batch_jobs")
    assert (shown["cancelled"], shown["nothing_open"], shown["status"]) == (0, True, "cancelled")
    unknown = failure(
        run(cancel_import_batch, instance, resources, "cancel_batch_jobs", {"batch_id": str(uuid.uuid4())})
    )
    assert "no such batch" in unknown
    bad = failure(run(cancel_import_batch, instance, resources, "cancel_batch_jobs", {"batch_id": "nope"}))
    assert "not a batch id" in bad


def test_retry_failed_jobs_in_each_form(instance, resources, conn, pool, settings, drained):
    failed = conn.execute("select id from ingestion_jobs where status = 'failed'").fetchone()["id"]

    result = run(retry_failed_jobs, instance, resources, "retry_jobs", {"all_failed": True})
    assert result.success
    shown = metadata(result, "retry_jobs")
    assert (shown["retried"], shown["job_ids"], shown["refused"]) == (1, [str(failed)], 0)
    assert job(conn, failed)["status"] == "pending"

    assert "nothing retried: no failed job" in failure(
        run(retry_failed_jobs, instance, resources, "retry_jobs", {"all_failed": True})
    )

    Worker(pool, settings).run(drain=True)
    by_batch = run(retry_failed_jobs, instance, resources, "retry_jobs", {"batch_id": str(drained.batch_id)})
    assert by_batch.success and metadata(by_batch, "retry_jobs")["retried"] == 1

    Worker(pool, settings).run(drain=True)
    completed = conn.execute("select id from ingestion_jobs where status = 'completed' limit 1").fetchone()["id"]
    by_id = run(retry_failed_jobs, instance, resources, "retry_jobs", {"job_ids": [str(failed), str(completed)]})
    assert by_id.success
    shown = metadata(by_id, "retry_jobs")
    assert (shown["retried"], shown["refusals"]) == (1, [{"job_id": str(completed), "reason": "completed"}])

    refused = failure(run(retry_failed_jobs, instance, resources, "retry_jobs", {"job_ids": [str(completed)]}))
    assert "completed jobs are not retried" in refused


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"all_failed": True, "batch_id": str(uuid.UUID(int=1))},
        {"job_ids": [str(uuid.UUID(int=1))], "all_failed": True},
    ],
)
def test_retry_failed_jobs_wants_exactly_one_form(instance, resources, config):
    assert "give exactly one of" in failure(run(retry_failed_jobs, instance, resources, "retry_jobs", config))
