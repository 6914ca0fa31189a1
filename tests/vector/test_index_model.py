"""The index knows its model (issue 47): each generation records the embedder that made its
vectors; a vector or hybrid query by another embedder is refused in one line; `ingest
reindex --embeddings` moves the documents to the configured embedder through new
generations while search keeps answering; `ingest health` says when vectors are missing,
mixed, or the vector index is absent."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest

from ingestion_pipeline import cli
from ingestion_pipeline.db.connection import connect, make_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import HashEmbedder, NoEmbedder
from ingestion_pipeline.processing.static_embedder import StaticEmbedder, wordllama_model
from ingestion_pipeline.search import search
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker.loop import Worker
from tests.helpers import seed_document, write_artifacts
from tests.vector.corpus import QUERIES, TOPICS, index_folder, write_corpus

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


def _reindex_embeddings(url: str, capsys) -> dict:
    assert cli.main(["reindex", "--embeddings", "--json", "--database-url", url]) in (0, 1)
    return json.loads(capsys.readouterr().out)


def _found(conn, text: str, mode: str, embedder) -> set[str]:
    return {hit.source_name for hit in search(conn, text, mode=mode, limit=20, embedder=embedder)}


def test_reindex_embeddings_moves_the_index_to_the_configured_model(db_url, tmp_path, monkeypatch, capsys):
    ids = index_folder(db_url, write_corpus(tmp_path / "corpus", paragraphs=1), embedder=OLD)
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")
    report = _reindex_embeddings(db_url, capsys)
    assert report["counts"] == {"reindex_queued": len(ids)}
    settings = load_settings(database_url=db_url, retry_backoff_seconds=0, parse_processes=0)
    text = "lava from the volcano crater"
    with make_pool(db_url, settings) as pool, connect(db_url) as conn:
        # Queued, nothing built: the old generations serve, by their own model and lexically.
        assert "volcano.txt" in _found(conn, text, "vector", OLD)
        assert "volcano.txt" in _found(conn, text, "lexical", None)
        assert Worker(pool, settings, embedder=NEW).run(drain=True, max_jobs=5).counts["completed"] == 5
        # Half way: each model's query finds its own documents by vector; hybrid finds every
        # document lexically meanwhile.
        moved = {name for name, (embedder, *_) in _generations_by_name(db_url).items() if embedder == "hash-64"}
        assert len(moved) == 5
        assert _found(conn, "otter river lamp tea lava violin bread ice chess orbit bees", "vector", NEW) <= moved
        assert _found(conn, text, "vector", OLD) <= set(ids) - moved
        for query, name in QUERIES.items():
            assert name in _found(conn, query, "hybrid", NEW), query
        assert Worker(pool, settings, embedder=NEW).run(drain=True).counts["completed"] == len(ids) - 5
        assert generations(db_url) == [("hash", 64, None)] * len(ids)
        assert "volcano.txt" in _found(conn, text, "vector", NEW)
        with pytest.raises(IngestError, match=re.escape("the index's vectors were made by hash (64 dims)")):
            search(conn, text, mode="vector", embedder=OLD)
    assert cli.main(["reindex", "--embeddings", "--database-url", db_url]) == 1
    assert capsys.readouterr().out == "nothing to reindex: every indexed document was embedded by hash (64 dims)\n"


def _generations_by_name(url: str) -> dict[str, tuple]:
    with connect(url) as conn:
        rows = conn.execute(
            "select d.source_name, g.embedder || '-' || g.embedder_dimensions as embedder from documents d "
            "join index_generations g on g.id = d.index_generation_id where d.deleted_at is null"
        ).fetchall()
    return {r["source_name"]: (r["embedder"],) for r in rows}
