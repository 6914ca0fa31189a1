"""The index knows its model (issue 47): each generation records the embedder that made its
vectors; a vector or hybrid query by another embedder is refused in one line; `ingest
reindex --embeddings` moves the documents to the configured embedder through new
generations while search keeps answering; `ingest health` says when vectors are missing,
mixed, or the vector index is absent."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest

from ingestion_pipeline import cli
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import HashEmbedder, NoEmbedder
from ingestion_pipeline.processing.static_embedder import StaticEmbedder, wordllama_model
from ingestion_pipeline.search import search
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


def test_a_query_by_another_embedder_is_refused_in_one_line(db_url, tmp_path):
    index_folder(db_url, write_corpus(tmp_path / "corpus", NAMES[:3], paragraphs=1), embedder=NEW)
    with connect(db_url) as conn:
        assert search(conn, "otter river", mode="vector", embedder=NEW)  # the index's model answers
        for mode in ("vector", "hybrid"):
            message = (
                f"{mode} search: the index's vectors were made by hash (64 dims); this query's embedder is "
                "hash (32 dims): set INGEST_EMBEDDER=hash or run `ingest reindex --embeddings` "
                "(or search with --mode lexical)"
            )
            with pytest.raises(IngestError, match=re.escape(message)):
                search(conn, "otter river", mode=mode, embedder=OLD)
        with pytest.raises(IngestError, match=re.escape("this query's embedder is wordllama-l2-supercat-256 (256")):
            search(conn, "otter river", embedder=StaticEmbedder(wordllama_model()))  # the default mode: hybrid
        assert search(conn, "otter river", mode="lexical")  # lexical needs no model


def test_vector_search_over_an_index_without_vectors_says_so(db_url, tmp_path, monkeypatch, capsys):
    index_folder(db_url, write_corpus(tmp_path / "corpus", NAMES[:3], paragraphs=1), embedder=NoEmbedder())
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")
    assert cli.main(["search", "otter river", "--mode", "vector", "--database-url", db_url]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "ingest: error: vector search: the index has no vectors (its documents were indexed with no embedder): "
        "set INGEST_EMBEDDER (e.g. wordllama) and run `ingest reindex --embeddings`, or search with --mode lexical\n"
    )
    # hybrid over an index without any vector ranks as lexical does
    assert cli.main(["search", "otter river", "--mode", "hybrid", "--database-url", db_url]) == 0
    assert "otters.txt" in capsys.readouterr().out.splitlines()[0]
