"""Non-interference on the vector path (issue 58; SPEC §10 and §11): a reader's hits, their
scores and the rows its search reads are the same with and without another tenant's means
nearer the query than anything the reader may read — more of them than pgvector's HNSW scan
visits (`hnsw.max_scan_tuples`), beside dead index tuples of deleted documents and superseded
generations; and a query is compared only with vectors of its own model.

Each test runs on the schema before migration …_vector_search_in_scope_and_model.sql, where
it observes the defect (on a server with pgvector: the HNSW path existed only there), and at
head. The lexical side of non-interference: test_non_interference.py."""

from __future__ import annotations

import random

import psycopg
import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.vector_index import ensure_hnsw_index
from ingestion_pipeline.processing.embedding import HashEmbedder
from ingestion_pipeline.search.vector import vector_search_path
from tests.old_enqueue import index_files
from tests.search.tenants_corpus import ALICE, MODES, answer, index, page, queries
from tests.vector.corpus import DIMENSIONS, EMBEDDER

SCOPES = [None, ["r1"], ["r2"], ["r1", "vault"]]
READERS = [ALICE, None]  # a member of r1 (and r2 is public); the anonymous reader
SCAN_LIMIT = "40"  # hnsw.max_scan_tuples, low: the case is cheap
NEARER = 200  # the other tenant's means per query and kind, nearer than any of the reader's: >> SCAN_LIMIT
# (pgvector checks the limit between the iterations of a scan, each ef_search tuples wide)


def own_corpus(url: str, tmp_path) -> None:
    """Alice's collections, with a superseded generation and a deleted document of their own."""
    rng = random.Random(58)
    index(url, tmp_path / "r1", {f"a{n}.md": page(rng, f"Alpha {n}", rng.randint(2, 5)) for n in range(8)}, "r1")
    index(url, tmp_path / "r2", {f"b{n}.md": page(rng, f"Beta {n}", rng.randint(2, 5)) for n in range(6)}, "r2")
    index(url, tmp_path / "r1", {"a1.md": page(rng, "Alpha 1, again", 3)}, "r1")
    with connect(url) as conn:
        conn.execute("select grant_collection('r1', %s)", (ALICE,))
        conn.execute("select add_collection('r2', true)")
        [b5] = conn.execute("select id from documents where source_name = 'b5.md'").fetchall()
        assert IngestionRpc(conn).delete_document(b5["id"]).ok
    ensure_hnsw_index(url, DIMENSIONS)


def add_means(conn: psycopg.Connection, collection: str, vector: list[float], count: int, model: str = "hash") -> list:
    """`count` live documents of `collection`, each with a committed generation whose mean is
    `vector` plus noise (a cosine of about 0.99 with it: nearer the query than any of the
    reader's documents, and spread enough for HNSW to link them as a graph), as `model` made it."""
    ids = [
        row["id"]
        for row in conn.execute(
            "insert into documents (collection, source_key, version, source_name, byte_size, status) "
            "select %s, %s || '://' || gen_random_uuid(), 1, 'private.md', 1, 'indexed' "
            "from generate_series(1, %s) returning id",
            (collection, collection, count),
        ).fetchall()
    ]
    conn.execute(
        "insert into index_generations (document_id, status, committed_at, embedder, embedder_dimensions, "
        "mean_embedding) "
        "select d, 'committed', now(), %s, cardinality(%s::real[]), "
        "array(select x + (random() - 0.5) * 0.05 from unnest(%s::real[]) as x) from unnest(%s::uuid[]) as d",
        (model, vector, vector, ids),
    )
    conn.execute(
        "update documents d set index_generation_id = g.id from index_generations g "
        "where g.document_id = d.id and d.id = any(%s)",
        (ids,),
    )
    return ids


def supersede(conn: psycopg.Connection, ids: list) -> None:
    """New builds of documents `ids` commit without vectors: their generations of `vector`
    become superseded, dead tuples of the HNSW index until VACUUM."""
    conn.execute("update index_generations set status = 'superseded' where document_id = any(%s)", (ids,))
    conn.execute(
        "insert into index_generations (document_id, status, committed_at) "
        "select d, 'committed', now() from unnest(%s::uuid[]) as d",
        (ids,),
    )
    conn.execute(
        "update documents d set index_generation_id = g.id from index_generations g "
        "where g.document_id = d.id and g.status = 'committed' and d.id = any(%s)",
        (ids,),
    )


def crowd(url: str, texts: list[str], nearer: int) -> None:
    """Another tenant: per query, `nearer` private means nearer than the reader's, as many of
    deleted documents (their generations still committed: live index tuples the scan must
    pass), and as many superseded generations (dead index tuples until VACUUM)."""
    with connect(url) as conn:
        conn.execute("select add_collection('vault', false)")
        for text in texts:
            vector = EMBEDDER.embed([text])[0]
            add_means(conn, "vault", vector, nearer)
            gone = add_means(conn, "vault", vector, nearer)
            conn.execute("update documents set deleted_at = now(), status = 'deleted' where id = any(%s)", (gone,))
            supersede(conn, add_means(conn, "vault", vector, nearer))


def has_pgvector(url: str) -> bool:
    with connect(url) as conn:
        return vector_search_path(conn) == "pgvector"


def run(url: str, calls: list[tuple], settings: dict[str, str], model: bool) -> list[tuple[list, dict]]:
    with connect(url) as conn:
        conn.execute("analyze")
        return [answer(conn, *call, settings=settings, model=model) for call in calls]


def test_a_readers_vector_hits_and_reads_ignore_means_past_the_scan_limit(vector_scope_schema, tmp_path):
    url = vector_scope_schema.url
    own_corpus(url, tmp_path)
    texts = queries(random.Random(5800), 8)
    calls = [
        (text, mode, SCOPES[(n + k) % len(SCOPES)], reader)
        for n, text in enumerate(texts)
        for k, mode in enumerate(MODES)
        for reader in READERS
    ]
    # The old function took its HNSW path for a scope of more than this many documents.
    settings = {"ingest.vector_exact_at_most": "0", "hnsw.max_scan_tuples": SCAN_LIMIT}
    model = vector_scope_schema.hardened
    alone = run(url, calls, settings, model)
    assert sum(bool(hits) for hits, _ in alone) >= len(calls) * 2 // 3, "most calls find something"

    crowd(url, texts, NEARER)
    crowded = run(url, calls, settings, model)
    differing = [call for call, before, after in zip(calls, alone, crowded, strict=True) if before != after]
    if vector_scope_schema.hardened or not has_pgvector(url):
        assert differing == []
    else:  # the bug: the scan's budget went to the vault's means, and the reader's hits with it
        assert any(mode != "lexical" for _, mode, _, _ in differing), differing


def test_at_pgvectors_default_scan_limit_a_reader_still_finds_its_documents(vector_scope_schema, tmp_path):
    """The review's case at full size: a public scope of 2,001 more documents (where the old
    function took the HNSW path), then 20,500 private means nearer the query."""
    url = vector_scope_schema.url
    own_corpus(url, tmp_path)
    text = "granite harbour lantern"
    elsewhere = EMBEDDER.embed(["walrus thistle saddle"])[0]
    with connect(url) as conn:
        add_means(conn, "r2", elsewhere, 2_001)
    calls = [(text, mode, ["r2"], reader) for mode in ("vector", "hybrid") for reader in READERS]
    model = vector_scope_schema.hardened
    alone = run(url, calls, {}, model)
    with connect(url) as conn:
        conn.execute("select add_collection('vault', false)")
        add_means(conn, "vault", EMBEDDER.embed([text])[0], 20_500)
    crowded = run(url, calls, {}, model)
    if vector_scope_schema.hardened or not has_pgvector(url):
        assert all(hits for hits, _ in alone)  # (the means added here have no chunks to show)
        assert crowded == alone
    else:  # the bug: the scan ends in the vault, the vector list is empty
        assert [hits for (hits, _), (_, mode, _, _) in zip(crowded, calls, strict=True) if mode == "vector"] == [[], []]


def owner_hits(url: str, text: str, settings: dict[str, str], model: bool) -> list[tuple[str, float]]:
    embedder = ", 'hash'" if model else ""
    with connect(url) as conn, conn.transaction():
        for name, value in settings.items():
            conn.execute("select set_config(%s, %s, true)", (name, value))
        rows = conn.execute(
            f"select source_uri, round(score::numeric, 6) as score from search_documents(%s, null, 'vector', 10, "
            f"%s::real[]{embedder})",
            (text, EMBEDDER.embed([text])[0]),
        ).fetchall()
    return [(row["source_uri"], float(row["score"])) for row in rows]


def live_uris(url: str) -> list[str]:
    with connect(url) as conn:
        rows = conn.execute("select source_key from documents where deleted_at is null").fetchall()
    return [row["source_key"] for row in rows]


def test_the_owners_hnsw_search_is_complete_past_dead_tuples(db_url, tmp_path):
    """Every collection is the owner's, so the owner keeps the HNSW path; when deleted documents
    and superseded generations fill its scan, the exact path answers instead of fewer hits.
    (Whether pgvector's scan ends before it reaches a live document depends on the graph its
    inserts drew: in most runs here it does, and a missing fallback fails this test.)"""
    if not has_pgvector(db_url):
        pytest.skip("no pgvector on this server: there is no HNSW path")
    own_corpus(db_url, tmp_path)
    text = "heron juniper kelp"
    vector = EMBEDDER.embed([text])[0]
    with connect(db_url) as conn:
        gone = add_means(conn, "r1", vector, 2_000)
        conn.execute("update documents set deleted_at = now(), status = 'deleted' where id = any(%s)", (gone,))
        supersede(conn, add_means(conn, "r1", vector, NEARER))
        conn.execute("analyze")
    exact = owner_hits(db_url, text, {"ingest.vector_exact_at_most": "1000000"}, True)
    through_index = owner_hits(
        db_url, text, {"ingest.vector_exact_at_most": "0", "hnsw.max_scan_tuples": SCAN_LIMIT}, True
    )
    assert len(exact) == 10, "exact"
    # As many hits as the exact path, the reader's own live documents (HNSW is approximate: the
    # nearest ten may differ by one near the cut).
    assert len(through_index) == 10, "through the index"
    assert {uri for uri, _ in through_index} <= set(live_uris(db_url))


class OtherModel(HashEmbedder):
    """Another model of the same size. Its vectors are the hash embedder's own, so that the old
    search, which compared them, ranked its documents by relevance: what it must not compare."""

    name = "other-64"


def test_a_query_is_compared_only_with_vectors_of_its_model(vector_scope_schema, tmp_path):
    """A re-embedding into another model of the same size has begun: some documents' current
    generations are the other model's. A `hash` query finds each document by the model that
    made its current vectors, or not at all."""
    url = vector_scope_schema.url
    own_corpus(url, tmp_path)
    text = "glacier heron fjord"
    folder = tmp_path / "other"
    folder.mkdir()
    for n in range(4):
        (folder / f"o{n}.md").write_text(f"# Other {n}\n\nThe glacier heron fjord, glacier and heron by the fjord.\n")
    _, drained = index_files(url, [folder], collection="r2", embedder=OtherModel(DIMENSIONS))
    assert drained.counts["completed"] == 4
    with connect(url) as conn:
        conn.execute("analyze")
    model = vector_scope_schema.hardened
    for settings in ({}, {"ingest.vector_exact_at_most": "0"}):
        hits = owner_hits(url, text, settings, model)
        from_other_model = [uri for uri, _ in hits if "/other/" in uri]
        if model:
            assert hits and from_other_model == [], settings
        else:
            assert from_other_model, "the bug: the other model's means compared and ranked first"


def test_a_vector_search_must_name_its_model(db_url):
    with connect(db_url) as conn, pytest.raises(psycopg.errors.InvalidParameterValue, match="needs p_embedder"):
        conn.execute("select * from search_documents('x', null, 'vector', 10, array[1, 0]::real[])").fetchall()
