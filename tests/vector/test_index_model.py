"""The index knows its model (issue 47): each generation records the embedder that made its
vectors; a vector or hybrid query by another embedder is refused in one line; `ingest
reindex --embeddings` moves the documents to the configured embedder through new
generations while search keeps answering; `ingest health` says when vectors are missing,
mixed, or the vector index is absent."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import HashEmbedder, NoEmbedder
from ingestion_pipeline.processing.static_embedder import StaticEmbedder, wordllama_model
from tests.helpers import seed_document, write_artifacts
from tests.vector.corpus import TOPICS, index_folder, write_corpus

OLD, NEW = HashEmbedder(32), HashEmbedder(64)  # INGEST_EMBEDDER=hash makes NEW's vectors
# otters, volcano and tea first: the queries below are about them
NAMES = ["otters.txt", "volcano.txt", "tea.txt", *sorted(set(TOPICS) - {"otters.txt", "volcano.txt", "tea.txt"})]


def generations(url: str) -> list[tuple]:
    """(embedder, dimensions, version) of each live document's committed generation."""
    with connect(url) as conn:
        rows = conn.execute(
            "select g.embedder, g.embedder_dimensions, g.embedder_version from documents d "
            "join index_generations g on g.id = d.index_generation_id where d.deleted_at is null"
        ).fetchall()
    return [(r["embedder"], r["embedder_dimensions"], r["embedder_version"]) for r in rows]


def test_each_generation_records_its_embedder(db_url, tmp_path):
    index_folder(db_url, write_corpus(tmp_path / "hash", NAMES[:2], paragraphs=1), embedder=NEW)
    assert generations(db_url) == [("hash", 64, None)] * 2
    index_folder(db_url, write_corpus(tmp_path / "none", NAMES[2:3], paragraphs=1), embedder=NoEmbedder())
    wordllama = StaticEmbedder(wordllama_model())
    index_folder(db_url, write_corpus(tmp_path / "wordllama", NAMES[3:4], paragraphs=1), embedder=wordllama)
    assert sorted(generations(db_url), key=str) == sorted(
        [("hash", 64, None)] * 2 + [("none", None, None), ("wordllama-l2-supercat-256", 256, version("wordllama"))],
        key=str,
    )


@pytest.mark.parametrize(
    "sent, recorded",
    [
        (
            {"name": "openai:nomic-embed-text", "dimensions": 768, "version": "v1.5"},
            ("openai:nomic-embed-text", 768, "v1.5"),
        ),
        ({"name": "odd", "dimensions": "768"}, ("odd", None, None)),  # dimensions must be a positive number
        (None, (None, None, None)),  # the previous release's call: nothing recorded
    ],
)
@pytest.mark.parametrize("call", ["commit_and_complete", "commit_generation"])
def test_the_commit_rpcs_take_the_embedder(conn, call, sent, recorded):
    rpc = IngestionRpc(conn)
    batch_id = rpc.create_batch("models", {}).batch_id
    document_id = seed_document(conn, batch_id)
    assert rpc.enqueue(document_id, batch_id=batch_id).ok
    [claimed] = rpc.claim("worker-1")
    token = claimed.lease_token
    generation_id = rpc.begin_generation(claimed.job_id, document_id, "worker-1", lease_token=token).generation_id
    write_artifacts(conn, document_id, generation_id, chunks=1)
    if call == "commit_and_complete":
        answer = rpc.commit_and_complete(
            claimed.job_id, document_id, generation_id, worker_id="worker-1", lease_token=token, embedder=sent
        )
    else:
        answer = rpc.commit_generation(
            claimed.job_id, document_id, generation_id, "worker-1", lease_token=token, embedder=sent
        )
    assert answer.ok
    row = conn.execute(
        "select embedder, embedder_dimensions, embedder_version from index_generations where id = %s",
        (generation_id,),
    ).fetchone()
    assert (row["embedder"], row["embedder_dimensions"], row["embedder_version"]) == recorded
