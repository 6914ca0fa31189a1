"""Non-interference (issue 44; SPEC §10): a reader's search results — documents, order,
scores, snippets — and the rows the call reads are the same with and without other tenants'
data: 10,000 private chunks of the same words, documents deleted and generations superseded.

One database at head. Alice reads `r1` (a member) and `r2` (public); her collections are
indexed, with a superseded generation and a deleted document of their own. Random queries
(words, a "phrase", an -excluded word) in the three modes and random scopes are answered and
their reads counted (pg_stat_xact_user_tables, in the call's transaction); then the other
tenants' data lands, and every call must answer and read exactly as before."""

from __future__ import annotations

import random

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from tests.search.tenants_corpus import ALICE, answer, index, page, queries

SCOPES = [None, ["r1"], ["r2"], ["r1", "vault"]]
QUERIES = 12
PRIVATE_CHUNKS = 10_000


def answers(url: str, calls: list[tuple[str, str, list[str] | None]]) -> list[tuple[list, dict]]:
    with connect(url) as conn:
        conn.execute("analyze")
        return [answer(conn, *call) for call in calls]


def test_a_readers_results_and_reads_do_not_depend_on_other_tenants(db_url, tmp_path):
    rng = random.Random(44)
    own = {"r1": {f"a{n}.md": page(rng, f"Alpha {n}", rng.randint(2, 5)) for n in range(8)}}
    own["r2"] = {f"b{n}.md": page(rng, f"Beta {n}", rng.randint(2, 5)) for n in range(6)}
    for collection, files in own.items():
        index(db_url, tmp_path / collection, files, collection)
    with connect(db_url) as conn:
        conn.execute("select grant_collection('r1', %s)", (ALICE,))
        conn.execute("select add_collection('r2', true)")
    # Alice's own history: a new version of a1 (its first generation superseded), b5 deleted.
    index(db_url, tmp_path / "r1", {"a1.md": page(rng, "Alpha 1, again", 3)}, "r1")
    with connect(db_url) as conn:
        [b5] = conn.execute("select id from documents where source_name = 'b5.md'").fetchall()
        assert IngestionRpc(conn).delete_document(b5["id"]).ok

    calls = [
        (text, mode, SCOPES[(n + k) % len(SCOPES)])
        for n, text in enumerate(queries(rng, QUERIES))
        for k, mode in enumerate(("lexical", "vector", "hybrid"))
    ]
    alone = answers(db_url, calls)
    assert sum(bool(hits) for hits, _ in alone) >= len(calls) * 2 // 3, "most calls find something"
    assert all(reads for _, reads in alone)

    # Other tenants: 10,000 private chunks of the same words, deleted documents, superseded generations.
    per_document = 500
    vault = {f"v{n}.md": page(rng, f"Vault {n}", per_document) for n in range(PRIVATE_CHUNKS // per_document)}
    index(db_url, tmp_path / "vault", vault, "vault")
    churn = {f"c{n}.md": page(rng, f"Churn {n}", 20) for n in range(6)}
    index(db_url, tmp_path / "churn", churn, "churn")
    index(db_url, tmp_path / "churn", {name: page(rng, "Again", 20) for name in list(churn)[:3]}, "churn")
    with connect(db_url) as conn:
        rpc = IngestionRpc(conn)
        for row in conn.execute("select id from documents where collection = 'churn' limit 4").fetchall():
            assert rpc.delete_document(row["id"]).ok
        private = conn.execute("select count(*) as n from searchable_chunks where collection = 'vault'").fetchone()
        assert private["n"] >= PRIVATE_CHUNKS

    with connect(db_url) as conn:
        # What autovacuum does at a time of its choosing, forced: every page all-visible, where
        # an index-only scan would read fewer heap rows than the first pass did.
        conn.execute("vacuum")
    crowded = answers(db_url, calls)
    for call, (hits, reads), (hits_after, reads_after) in zip(calls, alone, crowded, strict=True):
        assert hits_after == hits, call
        assert reads_after == reads, call
