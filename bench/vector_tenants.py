"""Vector and hybrid search latency for a reader whose scope holds 2,001 documents, alone and
beside another tenant's 100,000 documents nearer every query (issue 58's acceptance: within
2x).

One embedded server, two scratch databases migrated to head (pgvector: the HNSW path exists),
seeded in SQL (bench code writes the tables directly), all as the `hash` model with
--dimensions (default 256, the default model's), one chunk per document whose vector is the
document's mean (committed generation, embedder and dimensions recorded, term counts
compacted as the janitor does):

  pub    public collection, --documents (2,001): the anonymous reader's scope
  team   private collection, --documents: a member's (grant_collection), who searches
         p_collections {team}
  vault  private, nobody's, in the second database only: --others (100,000) documents
         whose means lie nearer every query (cosine ~0.9) than any of the readers' (<= ~0.75),
         then --deleted (10,000) of them deleted (no VACUUM after, autovacuum off on the
         tables: their HNSW tuples stay dead)

"alone" is the first database (pub and team, the HNSW index built); "with" is a copy of it
(CREATE DATABASE ... TEMPLATE: the same rows) plus vault, the HNSW index rebuilt over all
means, the deletes, ANALYZE. Queries: --queries points near one topic (a tenth of pub's and
team's documents lie near it, the rest near nine other centres), each with two words of the
chunks' vocabulary for hybrid. Each query is searched as each reader, in vector and hybrid
mode, as PostgREST runs a request (`set_config('role', ...)` and the claims in one
transaction), in both databases back to back (alternating which first: the same load on
both; the machine is shared), --rounds rounds, variants in rotating order; timed at the
client, statement only. The database's owner (p_collections null: every collection, the
shared HNSW index) for reference.

Printed: per reader and mode, p50/p95 alone and with, their ratios (the bar: <= 2),
whether every query's hits (document, score) are identical, and the rows one search reads
(pg_stat_xact_user_tables, as tests/reads.py counts them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import sys
import time
import uuid

from common import (
    clone_database,
    command_line,
    connect,
    create_database,
    embedded_server,
    machine_line,
    median,
    percentile,
    print_table,
)

from ingestion_pipeline.db.vector_index import ensure_hnsw_index, index_name

MODEL = "hash"
MEMBER = uuid.UUID("5a8e1c2d-58f0-4b7a-9c3e-2d6f0a1b7e58")
VOCABULARY = [
    "granite", "harbour", "lantern", "meadow", "orchard", "pebble", "quarry", "saddle", "thistle", "walrus",
    "beacon", "cobalt", "dune", "ember", "fjord", "glacier", "heron", "juniper", "kelp", "lichen",
]  # fmt: skip
CENTRES = 10  # centre 0 is the queries' topic
SPREAD = {"query": 0.03, "reader": 0.06, "other": 0.01}  # noise per coordinate at 256 dimensions

HELPERS = """
create or replace function pg_temp.near(v real[], s float8) returns real[] language sql volatile as $$
    select array_agg((b.y / b.n)::real order by b.i)
      from (select a.i, a.y, sqrt(sum(a.y * a.y) over ()) as n
              from (select u.i, u.x + random_normal(0, s) as y
                      from unnest(v) with ordinality as u (x, i)) a) b
$$;
create or replace function pg_temp.words(w text[], k integer) returns text language sql volatile as $$
    select string_agg(w[1 + floor(random() * cardinality(w))::integer], ' ') from generate_series(1, k)
$$;
"""

SEED_SQL = [
    # documents, live, no generation yet (the triggers that count terms run at the update below)
    """insert into documents (collection, source_key, version, source_name, byte_size, status, chunk_count)
       select %(c)s, %(c)s || '://' || n, 1, %(c)s || '-' || n || '.md', 1, 'indexed', 1
         from generate_series(1, %(count)s) n""",
    # a committed generation each, its mean near one of the centres
    """insert into index_generations (document_id, status, committed_at, embedder, embedder_dimensions,
                                      mean_embedding)
       select d.id, 'committed', now(), %(model)s, %(dims)s,
              pg_temp.near((%(centres)s::real[])[(d.k * %(dims)s) + 1:(d.k + 1) * %(dims)s], %(spread)s)
         from (select d.id, case when %(topic_only)s then 0 else row_number() over (order by d.id) %% %(k)s end as k
                 from documents d where d.collection = %(c)s) d""",
    # one chunk each: words for lexical search, the mean as its vector (fence and tsv triggers
    # off: the tsv as the trigger computes it)
    "set local session_replication_role = replica",
    """insert into document_chunks (document_id, index_generation_id, ordinal, content, content_tsv, embedding_vector)
       select s.document_id, s.id, 0, s.content, setweight(public.search_field_vector(s.content, false), 'D'),
              s.mean_embedding::vector
         from (select g.document_id, g.id, g.mean_embedding, pg_temp.words(%(vocabulary)s, 12) as content
                 from index_generations g join documents d on d.id = g.document_id
                where d.collection = %(c)s offset 0) s""",
    "set local session_replication_role = origin",
    # live: the triggers fill searchable_chunks and the term counts, as a commit does
    """update documents d set index_generation_id = g.id
         from index_generations g where g.document_id = d.id and d.collection = %(c)s""",
]


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def seed(conn, collection: str, count: int, centres: list[list[float]], spread: float, topic_only: bool) -> float:
    started = time.perf_counter()
    params = {
        "c": collection,
        "count": count,
        "model": MODEL,
        "dims": len(centres[0]),
        "centres": [x for centre in centres for x in centre],
        "spread": spread,
        "topic_only": topic_only,
        "k": len(centres),
        "vocabulary": VOCABULARY,
    }
    conn.execute(HELPERS)  # this session's
    with conn.transaction():
        for statement in SEED_SQL:
            conn.execute(statement, params if "%(" in statement else None)
    compact(conn)
    return time.perf_counter() - started


def compact(conn) -> None:
    """The janitor's compaction of the term counts (one row per document and lexeme until then)."""
    while conn.execute("select compact_search_term_counts(100000) as r").fetchone()["r"]["removed"]:
        pass


READERS = {  # label: (role, claims, p_collections)
    "anonymous, scope {pub}": ("anon", {"role": "anon"}, None),
    "member, p_collections {team}": ("authenticated", {"sub": str(MEMBER), "role": "authenticated"}, ["team"]),
    "owner (reference), every collection": (None, None, None),
}
SEARCH_SQL = "select document_id, score from search_documents(%s, %s, %s, 10, %s::real[], %s)"
READS_SQL = (
    "select coalesce(sum(seq_tup_read + idx_tup_fetch + seq_scan), 0)::bigint as n from pg_stat_xact_user_tables"
)


def search(conn, reader: str, mode: str, text: str, vector: list[float]) -> tuple[float, list, int]:
    """One search in its own transaction, as PostgREST runs it: seconds, hits, rows read."""
    role, claims, collections = READERS[reader]
    with conn.transaction():
        before = conn.execute(READS_SQL).fetchone()["n"]
        if role:
            conn.execute("select set_config('role', %s, true)", (role,))
            conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
        began = time.perf_counter()
        rows = conn.execute(SEARCH_SQL, (text, collections, mode, vector, MODEL)).fetchall()
        seconds = time.perf_counter() - began
        conn.execute("reset role")
        read = conn.execute(READS_SQL).fetchone()["n"] - before
    return seconds, [(r["document_id"], round(r["score"], 9)) for r in rows], read


def measure(uris: dict[str, str], queries: list[tuple[str, list[float]]], rounds: int) -> dict:
    """{phase: {(reader, mode): {"seconds": [...], "hits": [per query], "read": rows}}}: each
    search in both databases back to back, in alternating order (the same load on both)."""
    variants = [(reader, mode) for reader in READERS for mode in ("vector", "hybrid")]
    out = {phase: {v: {"seconds": [], "hits": [], "read": None} for v in variants} for phase in uris}
    conns = {phase: connect(uri) for phase, uri in uris.items()}
    try:
        for (text, vector), conn, (reader, mode) in itertools.product(queries[:3], conns.values(), variants):
            search(conn, reader, mode, text, vector)  # warm the caches and the catalog
        for round_, (i, (text, vector)) in itertools.product(range(rounds), enumerate(queries)):
            shift = (round_ * len(queries) + i) % len(variants)
            for n, v in enumerate(variants[shift:] + variants[:shift]):
                phases = list(conns) if (i + n + round_) % 2 else list(conns)[::-1]
                for phase in phases:
                    seconds, hits, read = search(conns[phase], *v, text, vector)
                    got = out[phase][v]
                    got["seconds"].append(seconds)
                    if round_ == 0:
                        got["hits"].append(hits)
                        got["read"] = read if got["read"] is None else got["read"]
    finally:
        for conn in conns.values():
            conn.close()
    return out


def build_index(uri: str, dims: int) -> float:
    started = time.perf_counter()
    print(f"  {ensure_hnsw_index(uri, dims)}", file=sys.stderr)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=2_001, help="documents in each reader's scope")
    parser.add_argument("--others", type=int, default=100_000, help="the other tenant's documents")
    parser.add_argument("--deleted", type=int, default=10_000, help="of those, deleted (dead index tuples)")
    parser.add_argument("--dimensions", type=int, default=256)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=58)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    dims, scale = args.dimensions, math.sqrt(256 / args.dimensions)  # the same cosines at any size
    centres = [unit([rng.gauss(0, 1) for _ in range(dims)]) for _ in range(CENTRES)]
    queries = [
        (" ".join(rng.sample(VOCABULARY, 2)), unit([x + rng.gauss(0, SPREAD["query"] * scale) for x in centres[0]]))
        for _ in range(args.queries)
    ]
    timings: dict[str, float] = {}
    with embedded_server() as server:
        print(machine_line(server))
        print(f"command: {command_line()}")
        uri = create_database(server, "bench_vt_alone", migrate=True)
        with connect(uri) as conn:
            for table in ("documents", "index_generations"):  # dead tuples stay dead
                conn.execute(f"alter table {table} set (autovacuum_enabled = false)")
            for name, public in (("pub", True), ("team", False), ("vault", False)):
                conn.execute("select add_collection(%s, %s)", (name, public))
            conn.execute("select grant_collection('team', %s)", (MEMBER,))
            for name in ("pub", "team"):
                timings[f"seed {name}"] = seed(conn, name, args.documents, centres, SPREAD["reader"] * scale, False)
            conn.execute("vacuum analyze")
        timings["index alone"] = build_index(uri, dims)
        # the same readers' rows (a copy), then the other tenant's
        other_uri = clone_database(server, "bench_vt_alone", "bench_vt_with")
        with connect(other_uri) as conn:  # the index rebuilt after: one build, not 100,000 inserts
            conn.execute(f"drop index {index_name(dims)}")
            timings["seed vault"] = seed(conn, "vault", args.others, centres, SPREAD["other"] * scale, True)
            conn.execute("vacuum analyze")
        timings["index with"] = build_index(other_uri, dims)
        with connect(other_uri) as conn:
            started = time.perf_counter()
            conn.execute(
                "update documents set deleted_at = now(), status = 'deleted' where id in "
                "(select id from documents where collection = 'vault' order by id limit %s)",
                (args.deleted,),
            )
            compact(conn)
            timings["delete"] = time.perf_counter() - started
            conn.execute("analyze")
            cosines = conn.execute(
                "select d.collection, -min(g.mean_embedding::vector <#> %s::real[]::vector) as best, "
                "count(*) filter (where d.deleted_at is null) as live, count(*) as documents "
                "from documents d join index_generations g on g.id = d.index_generation_id "
                "group by d.collection order by 1",
                (queries[0][1],),
            ).fetchall()
        print("  measuring", file=sys.stderr)
        measured = measure({"alone": uri, "with": other_uri}, queries, args.rounds)
        alone, other = measured["alone"], measured["with"]

    print(f"\nseconds: {', '.join(f'{k} {v:.1f}' for k, v in timings.items())}")
    print("query 0's best cosine per collection: " + ", ".join(f"{r['collection']} {r['best']:.3f}" for r in cosines))
    print(", ".join(f"{r['collection']}: {r['live']} live of {r['documents']}" for r in cosines))
    rows = []
    for (reader, mode), a in alone.items():
        w = other[(reader, mode)]
        same = sum(x == y for x, y in zip(a["hits"], w["hits"], strict=True))
        empty = sum(not x for x in a["hits"])
        rows.append([
            reader,
            mode,
            f"{median(a['seconds']) * 1000:.1f} / {percentile(a['seconds'], 95) * 1000:.1f}",
            f"{median(w['seconds']) * 1000:.1f} / {percentile(w['seconds'], 95) * 1000:.1f}",
            f"{median(w['seconds']) / median(a['seconds']):.2f} / "
            f"{percentile(w['seconds'], 95) / percentile(a['seconds'], 95):.2f}",
            f"{'yes' if same == len(queries) else 'no'} ({same}/{len(queries)}{f', {empty} empty' if empty else ''})",
            f"{a['read']} / {w['read']}",
        ])  # fmt: skip
    print_table(
        f"{args.documents:,} documents per reader's scope, {args.others:,} others ({args.deleted:,} deleted), "
        f"{dims} dimensions, {len(queries)} queries x {args.rounds} rounds",
        ["reader", "mode", "alone p50 / p95 ms", "with p50 / p95 ms", "ratio p50 / p95", "same hits", "rows read"],
        rows,
    )


if __name__ == "__main__":
    main()
