"""Lexical and hybrid search latency at 1x and 10x a manual (issues 35, 46): the PostgreSQL
15 manual by default, or --corpus sphinx / sqlalchemy (bench/corpora.py).

The database: every HTML page of the corpus (bench/corpora.py finds or fetches its Debian
package) indexed by `ingest enqueue` and `ingest work --drain --embedder E` (--embedder,
default the default embedder, wordllama; the database migrated for that embedder, which
builds its HNSW index), then the janitor's compaction of the term counts and
VACUUM ANALYZE. That is 1x. 10x: the committed rows (documents, generations, pages,
sections, chunks and their searchable_chunks rows: vectors and embeddings as they are) copied --copies times (default 9)
inside the database under new ids and source keys, in the same collection, with their term
counts, then compaction and VACUUM ANALYZE again.

Queries: --queries (default 200): --common of them (default 20) are the words in the most
documents (a lexeme that is a whole word), the rest entries of the corpus's index (the
judgments of bench/search_quality.py, sampled with --seed). Each
is searched with ingestion_pipeline.search.search(conn, q, mode=…, limit=10) in lexical and
in hybrid mode (the query's vector from the same embedder), --warmup untimed rounds then
--rounds timed ones; a query's time is its median over the rounds, timed at the client. The
modes run back to back per query, in alternating order, so that both see the same load.

Printed: p50/p95/max per scale, mode and kind of query; the hybrid/lexical ratio of p95;
and growth, the largest 10x/1x time ratio of any query (at most 10: cost grows at most
linearly), with that query. The bars (issue 35): lexical at 10x p95 <= 100 ms and max <= 1 s,
at 1x p95 <= 30 ms, hybrid p95 <= 2x lexical.

Server: a private embedded PostgreSQL by default (it ships pgvector, so hybrid runs on the
HNSW index), or --database-url (a superuser: the copy writes the tables directly, with
triggers off). The scratch database is dropped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import time
from dataclasses import dataclass, field

import corpora
import psycopg
from bookindex import sample
from common import (
    command_line,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    percentile,
    print_table,
)
from psycopg import sql
from search_quality import index_pages

from ingestion_pipeline import cli
from ingestion_pipeline.processing.embedding import embedder_from_settings
from ingestion_pipeline.search import search
from ingestion_pipeline.settings import load_settings

DATABASE = "bench_search_latency"
COPIED = [
    "documents",
    "index_generations",
    "document_pages",
    "document_sections",
    "document_chunks",
    "searchable_chunks",  # what lexical search reads (its trigger is off while rows are copied)
]
# How a copied row's columns change: new ids for the document and its generation, a source key
# and a content hash of its own (both are unique among live documents).
RENAMED = {
    "documents": {
        "id": "m.new_document",
        "index_generation_id": "m.new_generation",
        "source_key": "t.source_key || '#copy-' || m.copy",
        "content_sha256": "encode(sha256(convert_to(t.content_sha256 || m.copy, 'UTF8')), 'hex')",
    },
    "index_generations": {"id": "m.new_generation", "document_id": "m.new_document", "job_id": "null"},
}
ARTIFACT_IDS = {"document_id": "m.new_document", "index_generation_id": "m.new_generation"}
JOIN_ON = {"documents": "t.id = m.document_id", "index_generations": "t.id = m.generation_id"}


@dataclass
class Query:
    text: str
    kind: str  # "index term" or "common word"
    seconds: dict[tuple[str, str], float] = field(default_factory=dict)  # (scale, mode) -> median


def settle(conn: psycopg.Connection) -> dict:
    """What the janitor and autovacuum would have done by the time users search."""
    compacted = conn.execute("select compact_search_term_counts(1000000) as c").fetchone()["c"]
    conn.execute("vacuum analyze")
    return compacted


def copy_rows(conn: psycopg.Connection, copies: int) -> None:
    """Every committed document copied `copies` times under new ids, rows as they are."""
    conn.execute("set session_replication_role = replica")  # no triggers: rows are copied as built
    conn.execute(
        """create temp table copy_map as
           select d.id as document_id, gen_random_uuid() as new_document,
                  d.index_generation_id as generation_id, gen_random_uuid() as new_generation, k as copy
             from documents d cross join generate_series(1, %s) as k
            where d.deleted_at is null and d.index_generation_id is not null""",
        (copies,),
    )
    for table in COPIED:
        columns = [
            row["column_name"]
            for row in conn.execute(
                "select column_name from information_schema.columns where table_schema = 'public' and table_name = %s"
                " and is_generated = 'NEVER' order by ordinal_position",
                (table,),
            )
        ]
        renamed = RENAMED.get(table, ARTIFACT_IDS)
        values = [sql.SQL(renamed[c]) if c in renamed else sql.SQL("t.{}").format(sql.Identifier(c)) for c in columns]
        join = JOIN_ON.get(table, "t.index_generation_id = m.generation_id")
        conn.execute(
            sql.SQL("insert into {} ({}) select {} from {} t join copy_map m on {}").format(
                sql.Identifier(table),
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(values),
                sql.Identifier(table),
                sql.SQL(join),
            )
        )
    conn.execute("set session_replication_role = origin")
    conn.execute(  # the counts the trigger would have written
        """insert into search_term_counts (collection, lexeme, documents, chunks)
           select d.collection, t.lexeme, sum(t.documents), sum(t.chunks)
             from copy_map m join documents d on d.id = m.new_document
            cross join lateral search_generation_terms(d.id, d.index_generation_id, 1) t
            group by d.collection, t.lexeme"""
    )
    conn.execute("drop table copy_map")


def sizes(conn: psycopg.Connection) -> str:
    row = conn.execute(
        "select (select count(*) from documents where deleted_at is null) as documents,"
        " (select count(*) from committed_document_chunks) as chunks,"
        " pg_size_pretty(pg_total_relation_size('document_chunks')) as size"
    ).fetchone()
    return f"{row['documents']:,} documents, {row['chunks']:,} committed chunks, document_chunks {row['size']}"


def pick_queries(conn: psycopg.Connection, corpus: corpora.Corpus, count: int, common: int, seed: int) -> list[Query]:
    terms = [Query(j.query, "index term") for j in sample(corpus.judged.queries, count - common, seed)]
    words = conn.execute(
        """select lexeme from search_term_counts
            where lexeme ~ '^[a-z]{3,}$' and tsvector_to_array(to_tsvector('english', lexeme)) = array[lexeme]
            group by lexeme order by sum(documents) desc, lexeme limit %s""",
        (common,),
    ).fetchall()
    return terms + [Query(row["lexeme"], "common word") for row in words]


def measure(conn, queries: list[Query], scale: str, modes: list[str], rounds: int, warmup: int, embedder) -> None:
    """Each query searched in every mode back to back, the modes' order alternating: the
    modes see the same load (a busy machine's slow minute slows both, not one of them)."""
    rng = random.Random(35)
    times: dict[tuple[str, str], list[float]] = {(q.text, m): [] for q in queries for m in modes}
    for round_ in range(warmup + rounds):
        order = queries[:]
        rng.shuffle(order)
        for i, q in enumerate(order):
            for mode in modes if (i + round_) % 2 == 0 else modes[::-1]:
                began = time.perf_counter()
                search(conn, q.text, mode=mode, limit=10, embedder=embedder if mode != "lexical" else None)
                if round_ >= warmup:
                    times[(q.text, mode)].append(time.perf_counter() - began)
    for q in queries:
        for mode in modes:
            q.seconds[(scale, mode)] = statistics.median(times[(q.text, mode)])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def report(queries: list[Query], scales: list[str], modes: list[str]) -> None:
    rows = []
    for scale in scales:
        for mode in modes:
            for kind in ("index term", "common word", "all"):
                picked = [q.seconds[(scale, mode)] for q in queries if kind in ("all", q.kind)]
                rows.append(
                    [
                        scale,
                        mode,
                        kind,
                        len(picked),
                        *(ms(v) for v in (percentile(picked, 50), percentile(picked, 95), max(picked))),
                    ]
                )
    print_table(
        "Search latency (median of the timed rounds per query)",
        ["scale", "mode", "queries", "n", "p50", "p95", "max"],
        rows,
    )
    for scale in scales:
        p95 = {m: percentile([q.seconds[(scale, m)] for q in queries], 95) for m in modes}
        if "hybrid" in p95:
            print(f"{scale}: hybrid p95 / lexical p95 = {p95['hybrid'] / p95['lexical']:.2f}")
    if len(scales) == 2:
        for mode in modes:
            ratio, worst = max((q.seconds[(scales[1], mode)] / q.seconds[(scales[0], mode)], q.text) for q in queries)
            print(f"growth {scales[0]} -> {scales[1]}, {mode}: largest per-query ratio {ratio:.2f} ({worst!r})")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=corpora.NAMES, default="postgres", help="the manual (default postgres)")
    parser.add_argument("--database-url", help="a superuser's server URL (default: a private embedded server)")
    parser.add_argument("--copies", type=int, default=9, help="copies added for the larger scale (default 9: 10x)")
    parser.add_argument("--queries", type=int, default=200, help="queries (default 200)")
    parser.add_argument("--common", type=int, default=20, help="of them, common words (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--seed", type=int, default=35, help="query sample seed (default 35)")
    parser.add_argument("--lexical-only", action="store_true", help="skip hybrid search")
    parser.add_argument(
        "--embedder", default="wordllama", help="INGEST_EMBEDDER to index and query with (default wordllama)"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    print(f"$ {command_line()}")
    modes = ["lexical"] if args.lexical_only else ["lexical", "hybrid"]
    embedder = embedder_from_settings(load_settings(), args.embedder)
    corpus = corpora.load(args.corpus)
    server_cm = embedded_server() if not args.database_url else contextlib.nullcontext(args.database_url)
    with server_cm as server:
        print(machine_line(server), flush=True)
        uri = create_database(server, DATABASE, migrate=True)
        try:
            # Migrating again for the embedder builds its HNSW index (docs/vector-search.md).
            os.environ["INGEST_EMBEDDER"] = args.embedder
            if cli.main(["db", "migrate", "--database-url", uri]) != 0:
                raise SystemExit("ingest db migrate failed")
            began = time.monotonic()
            index_pages(uri, corpus.files, "--embedder", args.embedder, batch=corpus.name)
            with connect(uri) as conn:
                print(f"1x built in {time.monotonic() - began:.0f} s (compaction {settle(conn)}): {sizes(conn)}")
                print(f"corpus: {corpus.name}, {len(corpus.files):,} pages")
                queries = pick_queries(conn, corpus, args.queries, args.common, args.seed)
                measure(conn, queries, "1x", modes, args.rounds, args.warmup, embedder)
                scales = ["1x"]
                if args.copies:
                    began = time.monotonic()
                    copy_rows(conn, args.copies)
                    compacted = settle(conn)
                    scale = f"{args.copies + 1}x"
                    print(f"{scale} built in {time.monotonic() - began:.0f} s (compaction {compacted}): {sizes(conn)}")
                    measure(conn, queries, scale, modes, args.rounds, args.warmup, embedder)
                    scales.append(scale)
            report(queries, scales, modes)
        finally:
            drop_database(server, DATABASE)


if __name__ == "__main__":
    main()
