"""vector_hits on both paths: documents indexed by the worker with HashEmbedder, nearest
documents checked against cosine similarity worked out in Python, the HNSW index in the
plan, the two paths agreeing, and committed generations of live documents only."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.vector_index import ensure_hnsw_index, index_name
from ingestion_pipeline.search import search
from ingestion_pipeline.search.vector import vector_hits, vector_search_path
from tests.helpers import start_reindex_build
from tests.plans import captured_plans, scans_of
from tests.vector.corpus import (
    DIMENSIONS,
    EMBEDDER,
    QUERIES,
    embed,
    embedded_text,
    expected_ranking,
    index_folder,
    write_corpus,
)

TOLERANCE = 1e-4  # pgvector sums in float4; the exact path and Python in float8


def assert_nearest(hits, expected: list[tuple[str, float]], limit: int) -> None:
    """`hits` are `limit` documents no farther than any other, scored right, best first,
    one per document (ties at the cut may pick either document)."""
    scores = dict(expected)
    assert len(hits) == min(limit, len(expected))
    assert len({hit.document_id for hit in hits}) == len(hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    for hit in hits:
        assert hit.score == pytest.approx(scores[hit.source_name], abs=TOLERANCE), hit
    shown = {hit.source_name for hit in hits}
    assert all(score <= hits[-1].score + TOLERANCE for name, score in expected if name not in shown)


def test_each_kind_of_database_takes_its_path(any_db):
    with connect(any_db.url) as conn:
        assert vector_search_path(conn) == any_db.path


def test_worker_vectors_land_in_the_vector_column(pgvector_db, tmp_path):
    ids = index_folder(pgvector_db.url, write_corpus(tmp_path / "corpus", ["otters.txt", "tea.txt"]))
    with connect(pgvector_db.url) as conn:
        rows = conn.execute(
            "select title, heading, content, embedding, embedding_vector::real[] as vector, "
            "vector_dims(embedding_vector) as dims from document_chunks "
            "where document_id = any(%s)",
            (list(ids.values()),),
        ).fetchall()
    assert len(rows) > 2
    for row in rows:
        assert row["embedding"] is None, "moved, not copied: the real[] copy is cleared"
        assert row["dims"] == DIMENSIONS
        assert row["vector"] == pytest.approx(embed(embedded_text(row)), abs=1e-6)


def test_exact_path_keeps_vectors_in_real_arrays(exact_db, tmp_path):
    index_folder(exact_db.url, write_corpus(tmp_path / "corpus", ["otters.txt"]))
    with connect(exact_db.url) as conn:
        rows = conn.execute("select title, heading, content, embedding from document_chunks").fetchall()
    assert rows and all(row["embedding"] == pytest.approx(embed(embedded_text(row)), abs=1e-6) for row in rows)


def test_nearest_documents_on_every_path(any_db, tmp_path):
    index_folder(any_db.url, write_corpus(tmp_path / "corpus"))
    ensure_hnsw_index(any_db.url, DIMENSIONS)  # on the exact kinds it says so and does nothing
    with connect(any_db.url) as conn:
        for text, document in QUERIES.items():
            vector = embed(text)
            hits = vector_hits(conn, vector, 5, embedder="hash")
            assert hits[0].source_name == document, (text, hits)
            assert_nearest(hits, expected_ranking(any_db.url, vector), 5)
            content = conn.execute(
                "select content from committed_document_chunks where document_id = %s and ordinal = %s",
                (hits[0].document_id, hits[0].chunk_ordinal),
            ).fetchone()
            # the chunk's first 30 words, then an ellipsis
            assert hits[0].snippet == " ".join(content["content"].split()[:30]) + " …"
            json.dumps(hits[0].as_json())


def test_pgvector_and_exact_paths_agree_on_the_same_documents(fresh_db, tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    with_index, exact = fresh_db("pgvector"), fresh_db("no_privilege")
    for db in (with_index, exact):
        index_folder(db.url, corpus)
    ensure_hnsw_index(with_index.url, DIMENSIONS)
    with connect(with_index.url) as a, connect(exact.url) as b:
        for text in QUERIES:
            vector = embed(text)
            scan = vector_hits(b, vector, 12, embedder="hash")
            for hnsw_path in (False, True):  # pgvector: the documents scored directly, then via HNSW
                with exact_bound(a, 0 if hnsw_path else None):
                    hnsw = vector_hits(a, vector, 12, embedder="hash")
                assert hnsw[0].source_name == scan[0].source_name, text
                assert {h.source_name: round(h.score, 3) for h in hnsw} == {
                    h.source_name: round(h.score, 3) for h in scan
                }


@contextlib.contextmanager
def exact_bound(conn, documents: int | None) -> Iterator[None]:
    """ingest.vector_exact_at_most set for the block (None: the default, 20,000): a scope of
    more documents than that takes the HNSW path (migration 20261205000300)."""
    if documents is None:
        yield
        return
    conn.execute("select set_config('ingest.vector_exact_at_most', %s, false)", (str(documents),))
    try:
        yield
    finally:
        conn.execute("reset ingest.vector_exact_at_most")


def test_twenty_calls_of_the_search_rpc_each_use_the_hnsw_index(pgvector_db, tmp_path):
    """Twelve documents of fifty paragraphs each (about 600 chunks, analyzed): the planner
    picks the index in the statements the RPC
    runs (auto_explain's plans of its nested statements), call after call: twenty of them,
    with different vectors and collections, so a plan cached generic after the fifth would
    show (the generic-plan trap; the lexical half is tests/search/test_search_plans.py)."""
    folder = write_corpus(tmp_path / "corpus", paragraphs=50)
    index_folder(pgvector_db.url, folder)
    ensure_hnsw_index(pgvector_db.url, DIMENSIONS)
    texts = [*QUERIES, "otter river", "tea kettle", "storm at the lighthouse", "chess opening"]
    with connect(pgvector_db.url) as conn, captured_plans(conn) as plans:
        conn.execute("analyze document_chunks")
        assert conn.execute("select count(*) as n from document_chunks").fetchone()["n"] > 500
        # every collection over more documents than the exact bound (the HNSW index, the
        # owner's unscoped search), and one within it: its live documents by
        # documents_live_by_collection, each one's mean by the generation's primary key, and the
        # chunks shown by theirs
        for n in range(20):
            collections = None if n % 2 else ["default"]
            plans.clear()
            bound = 0 if collections is None else None
            text = texts[n % len(texts)]
            with exact_bound(conn, bound):
                assert vector_hits(conn, embed(text), 10, embedder="hash", collections=collections)
            scans = scans_of(plans, "document_chunks")
            if collections is None:
                means = scans_of(plans, "index_generations")
                assert ("Index Scan", index_name(DIMENSIONS)) in means, json.dumps(plans, indent=1)[:3000]
                assert not any(kind == "Seq Scan" for kind, _ in means), means
            else:
                assert set(scans) == {("Index Scan", "document_chunks_pkey")}, scans
                assert set(scans_of(plans, "documents")) <= {
                    ("Index Scan", "documents_live_by_collection"),
                    ("Index Scan", "documents_pkey"),
                }, scans_of(plans, "documents")
                assert ("Index Scan", "documents_live_by_collection") in scans_of(plans, "documents")
                assert set(scans_of(plans, "index_generations")) == {("Index Scan", "index_generations_pkey")}
            assert not any(kind == "Seq Scan" for kind, _ in scans), scans


def test_long_documents_do_not_crowd_out_the_rest(pgvector_db, tmp_path):
    """Each document has ~50 chunks: through the HNSW index (of the documents' means since
    migration 20261206000400, one entry per document; of the chunks before it, where the first
    over-fetch held one or two documents) the search still returns the `limit` nearest."""
    folder = write_corpus(tmp_path / "corpus", paragraphs=50)
    index_folder(pgvector_db.url, folder)
    ensure_hnsw_index(pgvector_db.url, DIMENSIONS)
    vector = embed("otter swims in the river stream")
    with connect(pgvector_db.url) as conn, exact_bound(conn, 0):
        hits = vector_hits(conn, vector, 6, embedder="hash")
    assert hits[0].source_name == "otters.txt"
    assert_nearest(hits, expected_ranking(pgvector_db.url, vector), 6)


PLANTED = "xylophone zeppelin quasar"


def test_deleted_documents_and_uncommitted_generations_never_appear(any_db, tmp_path):
    ids = index_folder(any_db.url, write_corpus(tmp_path / "corpus", ["otters.txt", "tea.txt", "volcano.txt"]))
    ensure_hnsw_index(any_db.url, DIMENSIONS)
    planted = embed(PLANTED)
    with connect(any_db.url) as conn:
        rpc = IngestionRpc(conn)
        # tea.txt: a rebuild in flight whose chunk is the query itself (similarity 1).
        _, building = start_reindex_build(rpc, conn, ids["tea.txt"], "builder-a")
        plant(conn, ids["tea.txt"], building, planted)
        # volcano.txt: deleted while a rebuild was in flight, so its committed rows stay
        # (the janitor removes them later); only the view's filter hides them.
        _, doomed = start_reindex_build(rpc, conn, ids["volcano.txt"], "builder-b")
        plant(conn, ids["volcano.txt"], doomed, planted)
        assert rpc.delete_document(ids["volcano.txt"]).ok
        left = conn.execute(
            "select count(*) as n from document_chunks where document_id = %s", (ids["volcano.txt"],)
        ).fetchone()["n"]
        assert left > 0, "the deleted document's rows must still be there for this test to mean anything"

        for vector in (planted, embed("lava from the volcano crater")):
            hits = vector_hits(conn, vector, 10, embedder="hash")
            assert {hit.source_name for hit in hits} <= {"otters.txt", "tea.txt"}
            assert all(hit.score < 0.99 for hit in hits), hits


def plant(conn, document_id, generation_id, vector: list[float]) -> None:
    conn.execute(
        "insert into document_chunks (document_id, index_generation_id, ordinal, content, embedding) "
        "values (%s, %s, 1000, %s, %s::real[])",
        (document_id, generation_id, PLANTED, vector),
    )


def test_other_dimensions_and_empty_databases_give_no_hits(any_db, tmp_path):
    with connect(any_db.url) as conn:
        assert vector_hits(conn, embed("otter"), 5, embedder="hash") == []
    index_folder(any_db.url, write_corpus(tmp_path / "corpus", ["otters.txt"]))
    with connect(any_db.url) as conn:
        assert vector_hits(conn, EMBEDDER.embed(["otter"])[0][:32], 5, embedder="hash") == []
        assert [hit.source_name for hit in vector_hits(conn, embed("otter"), 5, embedder="hash")] == ["otters.txt"]


@pytest.mark.parametrize(
    "vector, limit, message",
    [
        ([], 5, "empty"),
        ([1.0, float("nan")], 5, "NaN"),
        ([1.0, 2.0], 0, "limit"),
    ],
)
def test_bad_queries_are_refused_with_a_reason(pgvector_db, vector, limit, message):
    with connect(pgvector_db.url) as conn, pytest.raises(ValueError, match=message):
        vector_hits(conn, vector, limit, embedder="hash")


def test_hybrid_search_returns_results_on_both_paths(any_db, tmp_path):
    index_folder(any_db.url, write_corpus(tmp_path / "corpus"))
    ensure_hnsw_index(any_db.url, DIMENSIONS)
    with connect(any_db.url) as conn:
        for text, document in QUERIES.items():
            hybrid = search(conn, text, mode="hybrid", limit=5, embedder=EMBEDDER)
            vector = search(conn, text, mode="vector", limit=5, embedder=EMBEDDER)
            assert hybrid and vector[0].source_name == document, (text, vector)
            assert document in [hit.source_name for hit in hybrid[:2]], (text, hybrid)


def test_hybrid_shows_the_same_hits_through_hnsw_as_scoring_each_document(pgvector_db, tmp_path):
    """Hybrid ranks the vector list without chunks and shows its own documents by their most
    similar chunk (migration 20261205000300): through the HNSW index (the bound at 0) the
    nearest candidate chunk, scoring each document, the chunk found among its chunks."""
    index_folder(pgvector_db.url, write_corpus(tmp_path / "corpus"))
    ensure_hnsw_index(pgvector_db.url, DIMENSIONS)
    with connect(pgvector_db.url) as conn:
        for text in QUERIES:
            each = search(conn, text, mode="hybrid", limit=5, embedder=EMBEDDER)
            with exact_bound(conn, 0):
                hnsw = search(conn, text, mode="hybrid", limit=5, embedder=EMBEDDER)
            assert each
            assert [(h.source_name, h.chunk_ordinal, h.snippet, round(h.score, 4)) for h in hnsw] == [
                (h.source_name, h.chunk_ordinal, h.snippet, round(h.score, 4)) for h in each
            ], text


def test_cli_vector_and_hybrid_search(any_db, tmp_path, monkeypatch, capsys):
    index_folder(any_db.url, write_corpus(tmp_path / "corpus"))
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")  # HashEmbedder() has the corpus's 64 dimensions
    for mode in ("vector", "hybrid"):
        capsys.readouterr()
        assert (
            ingest(["search", "lava from the volcano crater", "--mode", mode, "--json", "--database-url", any_db.url])
            == 0
        )
        hits = json.loads(capsys.readouterr().out)
        assert hits[0]["source_name"] == "volcano.txt", (mode, hits)
