"""`cleanup.py --mode indexing`: abandoned chunk rows cleaned in bounded passes while a worker
process keeps indexing, and the sessions the cleanup blocks meanwhile."""

from __future__ import annotations

import multiprocessing as mp
import shutil
import tempfile
import threading
import time
from pathlib import Path

from common import connect, create_database, embedded_server, machine_line, ms, percentile, print_table, schema_version

# Abandoned rows are seeded directly, as the owner, with the artifact fence switched off
# for the seeding transaction only: the fence refuses rows for any generation that is not
# being built under a current lease, which an abandoned one by definition is not.
SEED_SQL = [
    "alter table document_chunks disable trigger document_chunks_artifact_fence",
    """insert into documents (source_name, content_sha256, byte_size, status)
       select 'abandoned-' || g, encode(sha256(convert_to('abandoned/' || g, 'UTF8')), 'hex'), 0, 'failed'
         from generate_series(1, %(documents)s) g""",
    """insert into index_generations (document_id, status)
       select id, 'abandoned' from documents where source_name like 'abandoned-%%'""",
    """insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count)
       select g.document_id, g.id, o,
              'abandoned chunk ' || o || ' of a build that never committed: lease fence worker queue', 12
         from index_generations g cross join generate_series(0, %(per_document)s - 1) o
        where g.status = 'abandoned'""",
    "alter table document_chunks enable trigger document_chunks_artifact_fence",
]

WINDOW_SQL = """
select stage, count(*) as n,
       percentile_cont(0.5) within group (order by (detail->>'seconds')::float8) as p50,
       percentile_cont(0.99) within group (order by (detail->>'seconds')::float8) as p99
  from ingestion_job_stages
 where finished_at >= %(start)s and finished_at < %(end)s and stage in ('write', 'commit')
 group by stage
"""

WAITERS_SQL = """
select count(*) as n from pg_stat_activity
 where wait_event_type = 'Lock' and %(pid)s = any (pg_blocking_pids(pid))
"""


def indexer(uri: str, folder: str, concurrency: int, stop, ready) -> None:
    """Index the corpus, then reindex it, until stopped (runs in its own process)."""
    from ingestion_pipeline.db.connection import make_pool
    from ingestion_pipeline.operations.enqueue import enqueue_paths
    from ingestion_pipeline.settings import Settings
    from ingestion_pipeline.worker import Worker

    settings = Settings(database_url=uri, worker_concurrency=concurrency, pool_max_size=2 * concurrency + 2)
    with make_pool(uri, settings) as pool:
        ready.set()
        reindex = False
        while not stop.is_set():
            enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes, batch_name="indexer", reindex=reindex)
            Worker(pool, settings, label="bench-indexer").run(drain=True, stop=stop)
            reindex = True


def db_now(conn):
    return conn.execute("select clock_timestamp() as t").fetchone()["t"]


def sample_waiters(uri: str, pid: int, stop: threading.Event, found: list[int]) -> None:
    with connect(uri) as conn:
        while not stop.wait(0.02):
            found.append(conn.execute(WAITERS_SQL, {"pid": pid}).fetchone()["n"])


def window(conn, start, end) -> dict:
    stages = {r["stage"]: r for r in conn.execute(WINDOW_SQL, {"start": start, "end": end}).fetchall()}
    seconds = (end - start).total_seconds()
    commits = stages.get("commit", {}).get("n", 0)
    return {
        "seconds": seconds,
        "docs": commits,
        "rate": commits / seconds if seconds else 0.0,
        **{
            f"{stage}_{q}": stages[stage][q] if stage in stages else float("nan")
            for stage in ("write", "commit")
            for q in ("p50", "p99")
        },
    }


def run_indexing(args) -> None:
    documents = max(1, args.chunks // args.chunks_per_doc)
    corpus = Path(tempfile.mkdtemp(prefix="ingest-bench-corpus-"))
    from ingest_corpus import generate_corpus

    generate_corpus(corpus, args.corpus_docs, 8, seed=11)
    try:
        with embedded_server() as server_uri:
            print(machine_line(server_uri))
            uri = create_database(server_uri, "bench_cleanup", migrate=True, target=args.target)
            print(f"schema: migrated up to {schema_version(uri)}")
            from ingestion_pipeline.db.rpc import IngestionRpc

            with connect(uri) as conn:
                started = time.perf_counter()
                with conn.transaction():
                    for sql in SEED_SQL:
                        conn.execute(sql, {"documents": documents, "per_document": args.chunks_per_doc})
                for table in ("documents", "index_generations", "document_chunks"):
                    conn.execute(f"vacuum (analyze) {table}")
                seeded = conn.execute("select count(*) as n from document_chunks").fetchone()["n"]
                print(
                    f"seeded {seeded} abandoned chunk rows ({documents} documents) in "
                    f"{time.perf_counter() - started:.1f}s"
                )

                ctx = mp.get_context("spawn")
                stop, ready = ctx.Event(), ctx.Event()
                worker = ctx.Process(target=indexer, args=(uri, str(corpus), args.concurrency, stop, ready))
                worker.start()
                try:
                    ready.wait(60)
                    t0 = db_now(conn)
                    time.sleep(args.baseline_seconds)
                    t1 = db_now(conn)

                    rpc = IngestionRpc(conn)
                    pid = conn.execute("select pg_backend_pid() as pid").fetchone()["pid"]
                    waiters: list[int] = []
                    sampler_stop = threading.Event()
                    sampler = threading.Thread(target=sample_waiters, args=(uri, pid, sampler_stop, waiters))
                    sampler.start()
                    passes, deleted = [], 0
                    while True:
                        began = time.perf_counter()
                        result = rpc.cleanup_generations(limit=args.limit, dry_run=False)
                        passes.append(time.perf_counter() - began)
                        deleted += result.chunks
                        if result.documents == 0:
                            break
                    t2 = db_now(conn)
                    sampler_stop.set()
                    sampler.join()
                finally:
                    stop.set()
                    worker.join(120)
                    if worker.is_alive():
                        worker.terminate()
                left = conn.execute(
                    "select count(*) as n from document_chunks c join documents d on d.id = c.document_id"
                    " where d.source_name like 'abandoned-%%'"
                ).fetchone()["n"]
                base, during = window(conn, t0, t1), window(conn, t1, t2)

            total = (t2 - t1).total_seconds()
            print_table(
                f"cleanup of {seeded} abandoned chunk rows, limit={args.limit} documents/pass "
                f"({args.limit * args.chunks_per_doc} chunks/pass) while indexing",
                [
                    "passes",
                    "chunks deleted",
                    "seeded left",
                    "seconds",
                    "chunks/s",
                    "pass p50 ms",
                    "pass p99 ms",
                    "pass max ms (max lock hold)",
                    "lock waiters seen",
                ],
                [
                    [
                        len(passes),
                        deleted,
                        left,
                        f"{total:.1f}",
                        f"{deleted / total:.0f}",
                        ms(percentile(passes, 50)),
                        ms(percentile(passes, 99)),
                        ms(max(passes)),
                        f"{sum(1 for w in waiters if w)}/{len(waiters)} samples",
                    ]
                ],
            )
            print_table(
                f"indexer (1 process, concurrency {args.concurrency}, {args.corpus_docs}-doc corpus, reindexed "
                "in a loop)",
                [
                    "window",
                    "seconds",
                    "docs",
                    "docs/s",
                    "write p50 ms",
                    "write p99 ms",
                    "commit p50 ms",
                    "commit p99 ms",
                ],
                [
                    [
                        name,
                        f"{w['seconds']:.1f}",
                        w["docs"],
                        f"{w['rate']:.1f}",
                        ms(w["write_p50"]),
                        ms(w["write_p99"]),
                        ms(w["commit_p50"]),
                        ms(w["commit_p99"]),
                    ]
                    for name, w in (("baseline (no cleanup)", base), ("during cleanup", during))
                ],
            )
    finally:
        shutil.rmtree(corpus, ignore_errors=True)
