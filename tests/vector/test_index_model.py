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
from ingestion_pipeline.db.vector_index import ensure_hnsw_index
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


def _health(url: str, capsys) -> tuple[int, dict, list[str]]:
    code = cli.main(["health", "--json", "--database-url", url])
    report = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in report["checks"]}
    assert cli.main(["health", "--database-url", url]) == code
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("needs action: ")]
    return code, checks, lines


def test_health_says_vectors_missing_mixed_and_index_absent(pgvector_db, tmp_path, monkeypatch, capsys):
    url = pgvector_db.url
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")
    index_folder(url, write_corpus(tmp_path / "new", NAMES[:2], paragraphs=1), embedder=NEW)
    code, checks, lines = _health(url, capsys)
    assert code == 1 and lines == [
        "needs action: vector index absent: index_generations_mean_hnsw_64 (HNSW, 64 dimensions) is absent, so "
        "vector search over more than 2,000 documents scans every document's mean vector: `ingest db migrate` "
        "builds it for the configured embedder's dimension"
    ]
    assert checks["vectors_present"]["passed"] and checks["one_embedder"]["passed"]
    ensure_hnsw_index(url, 64)
    assert _health(url, capsys)[0] == 0

    index_folder(url, write_corpus(tmp_path / "none", NAMES[2:5], paragraphs=1), embedder=NoEmbedder())
    index_folder(url, write_corpus(tmp_path / "old", NAMES[5:6], paragraphs=1), embedder=OLD)
    code, checks, lines = _health(url, capsys)
    assert code == 1 and [line.split(":")[1] for line in lines] == [" vectors missing", " vectors mixed"]
    assert lines[0] == (
        "needs action: vectors missing: 3 document(s) indexed with no embedder while INGEST_EMBEDDER=hash makes "
        "vectors (hash (64 dims)); vector search does not find them: `ingest reindex --embeddings` embeds them"
    )
    assert lines[1].startswith(
        "needs action: vectors mixed: the live documents' vectors were made by 2 embedders "
        "(hash (64 dims): 2 document(s), hash (32 dims): 1 document(s))"
    )
    assert checks["vectors_present"]["message"] == lines[0].removeprefix("needs action: ")
    assert not checks["one_embedder"]["passed"] and checks["vector_index_present"]["passed"]

    monkeypatch.setenv("INGEST_EMBEDDER", "none")  # no embedder configured: nothing is missing
    code, checks, _ = _health(url, capsys)
    assert checks["vectors_present"]["passed"] and not checks["one_embedder"]["passed"]
