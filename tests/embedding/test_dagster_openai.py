"""A Dagster drain run (ingest_documents, in process) embeds with INGEST_EMBEDDER=openai read
from the environment, and an embedder it cannot build fails the run in one line."""

from __future__ import annotations

import dagster as dg
import pytest

from ingestion_pipeline.definitions import make_definitions
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from tests.embedding.corpus import assert_every_document_indexed_with_vectors, write_corpus


@pytest.fixture
def instance():
    with dg.instance_for_test() as test_instance:
        yield test_instance


def drain_run(instance, db_url: str, processing: ProcessingResource):
    job = make_definitions(DatabaseResource(database_url=db_url), processing).resolve_job_def("ingest_documents")
    return job.execute_in_process(instance=instance, raise_on_error=False)


def test_a_drain_run_embeds_with_the_settings_openai_embedder(
    instance, db_url, conn, pool, tmp_path, openai_server, monkeypatch
):
    for name, value in {
        "EMBEDDER": "openai",
        "OPENAI_BASE_URL": openai_server.url,
        "OPENAI_MODEL": openai_server.model,
        "OPENAI_API_KEY": openai_server.api_key,
        "OPENAI_DIMENSIONS": "12",
        "PARSE_PROCESSES": "1",
    }.items():
        monkeypatch.setenv(f"INGEST_{name}", value)
    enqueue_paths(pool, [write_corpus(tmp_path / "corpus", 4)], max_bytes=1_000_000)

    result = drain_run(instance, db_url, ProcessingResource())

    assert result.success
    chunks = assert_every_document_indexed_with_vectors(conn, 4, dimensions=12)
    assert openai_server.inputs == len(chunks)
    run_config = str(instance.get_run_by_id(result.run_id).run_config)
    assert openai_server.api_key not in run_config  # the key stays in the environment


def test_an_embedder_it_cannot_build_fails_the_run_in_one_line(instance, db_url, monkeypatch):
    monkeypatch.delenv("INGEST_OPENAI_MODEL", raising=False)

    result = drain_run(instance, db_url, ProcessingResource(embedder="openai"))

    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.event_specific_data.error.message.strip().endswith(
        "bad settings: INGEST_OPENAI_MODEL must be set when INGEST_EMBEDDER=openai (the embedding model's name, "
        "e.g. text-embedding-3-small)"
    )
