"""INGEST_EMBEDDER=openai end to end on a real database: a real Worker (parsing in its
children, the default) indexes a batch with vectors from the local OpenAI-compatible server;
429s and timeouts mid-batch are retried by the queue until every document is indexed; a bad
key or model fails each job for good with one line; a slow endpoint is not a parse timeout."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.processing.openai_embedder import OpenAIEmbedder
from ingestion_pipeline.worker import Worker, WorkerReport
from tests.embedding.corpus import (
    assert_every_document_indexed_with_vectors,
    embed_stage_errors,
    jobs,
    write_corpus,
)


def drain(settings, folder: Path, **worker_options) -> WorkerReport:
    with make_pool(settings.database_url, settings) as pool:
        enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes)
        worker = Worker(pool, settings, **worker_options)
        assert isinstance(worker.context.embedder, OpenAIEmbedder)  # INGEST_EMBEDDER's, by default
        return worker.run(drain=True)


def test_a_batch_indexes_with_vectors_embedded_in_the_jobs_threads(
    db_url, conn, tmp_path, openai_server, openai_settings
):
    settings = openai_settings(database_url=db_url, openai_dimensions=16, openai_batch_size=4)
    assert settings.parse_processes > 0  # parsing in children: the default

    report = drain(settings, write_corpus(tmp_path / "corpus", 12))

    assert (report.counts["completed"], report.counts["failed"], report.counts["retried"]) == (12, 0, 0)
    chunks = assert_every_document_indexed_with_vectors(conn, 12, dimensions=16)
    per_document = conn.execute("select chunk_count from documents").fetchall()
    assert openai_server.inputs == len(chunks)
    assert openai_server.requests == sum(math.ceil(d["chunk_count"] / 4) for d in per_document)
    assert max(d["chunk_count"] for d in per_document) > 4  # so some documents needed several requests
    stages = conn.execute("select stage, detail from ingestion_job_stages where stage in ('parse', 'embed')").fetchall()
    assert {s["detail"].get("isolated") for s in stages if s["stage"] == "parse"} == {True}  # parsed in children
    embeds = [s["detail"] for s in stages if s["stage"] == "embed"]
    assert len(embeds) == 12 and all(d["embedder"] == "openai" and "isolated" not in d for d in embeds)


def test_429s_and_timeouts_mid_batch_are_retried_until_every_document_is_indexed(
    db_url, conn, tmp_path, openai_server, openai_settings
):
    # The client does not retry (INGEST_OPENAI_MAX_RETRIES=0): every fault fails one attempt
    # of a job, which the queue retries at once (INGEST_RETRY_BACKOFF_SECONDS=0).
    settings = openai_settings(database_url=db_url, openai_batch_size=4, openai_timeout_seconds=2, max_attempts=10)
    openai_server.fail_next(3, status=429, after=5)
    openai_server.stall_next(2, seconds=60, after=4)  # longer than the timeout; hangs up at the end

    report = drain(settings, write_corpus(tmp_path / "corpus", 12))

    assert (report.counts["completed"], report.counts["failed"]) == (12, 0)
    assert report.counts["retried"] >= 5
    assert_every_document_indexed_with_vectors(conn, 12, dimensions=32)
    assert sum(j["attempt_count"] for j in jobs(conn)) == 12 + report.counts["retried"]
    errors = embed_stage_errors(conn)
    assert (
        errors.count(
            "EmbeddingUnavailable: the embedding endpoint answered 429 in 1 try "
            "(INGEST_OPENAI_MAX_RETRIES=0): injected 429"
        )
        == 3
    )
    assert sum("did not answer within 2 s (INGEST_OPENAI_TIMEOUT_SECONDS)" in e for e in errors) >= 2
    assert openai_server.statuses[429] == 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"openai_api_key": "sk-wrong-key"},
            "the embedding endpoint rejected the API key (401): check INGEST_OPENAI_API_KEY",
        ),
        (
            {"openai_model": "no-such-model"},
            "the embedding endpoint does not know model 'no-such-model' (404: The model `no-such-model` does not exist "
            "or you do not have access to it.): check INGEST_OPENAI_MODEL and INGEST_OPENAI_BASE_URL",
        ),
    ],
)
def test_a_bad_key_or_model_fails_each_job_for_good_in_one_line(
    db_url, conn, tmp_path, openai_server, openai_settings, overrides, message
):
    settings = openai_settings(database_url=db_url, openai_max_retries=2, **overrides)  # max_attempts: 3

    report = drain(settings, write_corpus(tmp_path / "corpus", 3))

    assert (report.counts["failed"], report.counts["retried"], report.counts["completed"]) == (3, 0, 0)
    assert (
        jobs(conn)
        == [{"status": "failed", "attempt_count": 1, "error_message": message, "document_status": "failed"}] * 3
    )
    assert openai_server.requests == 3  # one per job: neither the client nor the queue retried
    assert "sk-wrong-key" not in str(conn.execute("select * from ingestion_job_stages").fetchall())


def test_a_slow_endpoint_is_not_a_parse_timeout(db_url, conn, tmp_path, openai_server, openai_settings):
    """Each request takes 0.5 s, a document's embedding several seconds: longer than the
    parse timeout, which it does not count against (it runs in the job's thread)."""
    openai_server.latency_seconds = 0.5
    settings = openai_settings(database_url=db_url, openai_batch_size=1, parse_timeout_seconds=2)

    report = drain(settings, write_corpus(tmp_path / "corpus", 2, paragraphs=4))

    assert (report.counts["completed"], report.counts["failed"]) == (2, 0), [r.message for r in report.results]
    chunks = assert_every_document_indexed_with_vectors(conn, 2, dimensions=32)
    assert len(chunks) / 2 * openai_server.latency_seconds > settings.parse_timeout_seconds
    seconds = conn.execute(
        "select max((detail->>'seconds')::float8) as s from ingestion_job_stages where stage = 'embed'"
    ).fetchone()["s"]
    assert seconds > settings.parse_timeout_seconds


def test_ingest_work_embeds_and_ingest_search_finds_by_vector(
    db_url, conn, tmp_path, openai_server, monkeypatch, capsys
):
    for name, value in {
        "EMBEDDER": "openai",
        "OPENAI_BASE_URL": openai_server.url,
        "OPENAI_MODEL": openai_server.model,
        "OPENAI_DIMENSIONS": "64",
    }.items():
        monkeypatch.setenv(f"INGEST_{name}", value)
    monkeypatch.setenv("OPENAI_API_KEY", openai_server.api_key)  # the conventional name works too
    folder = write_corpus(tmp_path / "corpus", 3)
    (folder / "otters.md").write_text("# Otters\n\nAn otter sleeps in its holt on the riverbank, whiskers dry.\n")

    assert ingest(["enqueue", str(folder), "--database-url", db_url]) == 0
    assert ingest(["work", "--drain", "--json", "--database-url", db_url]) == 0
    assert_every_document_indexed_with_vectors(conn, 4, dimensions=64)

    printed = capsys.readouterr()
    assert openai_server.api_key not in printed.out + printed.err
    for mode in ("vector", "hybrid"):  # the query's vector comes from the same server
        assert (
            ingest(["search", "whiskers of an otter in a holt", "--mode", mode, "--json", "--database-url", db_url])
            == 0
        )
        assert json.loads(capsys.readouterr().out)[0]["source_name"] == "otters.md"
