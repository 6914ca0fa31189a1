"""The guarded cleanup of abandoned index generations, in three modes.

--mode indexing (the default): cleaning many abandoned chunk rows in bounded passes while
a worker keeps indexing. Seeds D documents (no open job) each with one abandoned generation of C chunks (D*C =
--chunks, default 1M) with `insert ... select generate_series`. A worker process then
indexes a generated corpus over and over (enqueue with reindex, drain, repeat; each
round also leaves superseded generations behind). After a baseline window without
cleanup, this process calls `rpc.cleanup_generations(limit=L, dry_run=False)` until a pass
finds nothing. Each pass is one transaction, so its duration is the upper bound of every
lock it holds (the proxy for lock hold). A sampler polls pg_stat_activity every 20 ms
for sessions waiting on a lock held by the cleanup's backend.

Reported: passes, rows, time, per-pass p50/p99/max; the worker's docs/s and write/commit
stage times (stage log) in the baseline window and during cleanup.

--mode scale: does a pass cost the same however many documents are present? One database
per size in --live (default 10k and 100k; --full: 10k and 1M) holds that many live
documents, each indexed: a committed generation with one page, one section and
--live-chunks chunk rows, and one completed job. Every database also gets the same
abandoned work: --abandoned documents (indexed too) each with one abandoned generation of
one page, one section and --abandoned-chunks chunks. All of it is
seeded set-based (generate_series), with triggers off for the seeding transaction only
(foreign keys, artifact fence: the rows are valid by construction, and checked after).
Then passes of `rpc.cleanup_generations(limit=L, dry_run=False)` alternate between the
databases (one pass each in turn) until every database's passes find nothing. Printed: the
pass p50/p99/max per size and each p50 against the smallest size's (acceptance: within 2x).

Before the timed passes, passes 1..7 run in each database on one connection in a
transaction that is rolled back, with auto_explain (ANALYZE, log_nested_statements) on for
passes 1 and 7 (--explain-passes; the 7th runs the plans plpgsql settles on once it may use
generic ones): every statement of those passes (the candidate select, the deletes, and the
foreign-key actions they fire) is listed with the rows it read from documents,
index_generations, ingestion_jobs and document_chunks and any sequential scan, so a
statement that reads a whole table shows. --plans prints the plans themselves.

--mode zero: what the janitor costs when there is nothing to clean (issue 29). One database
per size in --live (default 10k and 100k; --full: 10k, 100k and 1M) holds that many live
documents, seeded as in --mode scale but with no abandoned work, each document's bytes
stored (document_sources, as an enqueue leaves them), and one completed batch per
--per-batch documents (default 100), finished a day or more ago, its counters those of its
jobs (checked). Timed, on one connection per database, round-robin over the databases,
--repeat times after --warmup untimed calls: each call run_janitor makes (expire stale
leases, refresh stuck and drifted batches, the cleanup's dry run) and the cleanup with
dry_run false, each asserted to find nothing. Printed: p50/p99/max per call and size, each
p50 against the smallest size's (acceptance: within 2x), and one call of each under
auto_explain: the rows its statements examined per table (rows returned plus rows their
filters removed), so a call that reads every document or every job shows.

--target VERSION (every mode) migrates only up to that migration (default: head).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import tempfile
import threading
import time
from pathlib import Path

from common import (
    clone_database,
    command_line,
    connect,
    create_database,
    embedded_server,
    machine_line,
    ms,
    percentile,
    print_table,
    schema_version,
)

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


# -- --mode scale ---------------------------------------------------------------------------

# Live documents (indexed: one committed generation with its chunks, one completed job),
# then the abandoned work (the last --abandoned documents also get an abandoned generation).
# Foreign keys and the artifact fence are triggers: session_replication_role = replica turns
# them off for this transaction only, so documents and generations (which reference each
# other) go in with one insert each.
SCALE_SEED_SQL = [
    "set local session_replication_role = replica",
    # One import batch per --per-batch documents (scale: one batch for all), finished a day or
    # more ago (a minute apart), its counters those of its jobs; every row of a batch's
    # documents carries the batch's time.
    """create temporary table seed_docs on commit drop as
       select g, gen_random_uuid() as document_id, gen_random_uuid() as generation_id,
              g > %(live)s as abandoned, (g - 1) / %(per_batch)s as batch
         from generate_series(1, %(live)s + %(abandoned)s) g""",
    """create temporary table seed_batches on commit drop as
       select batch, gen_random_uuid() as batch_id, count(*) as files,
              now() - interval '1 day' - batch * interval '1 minute' as at
         from seed_docs group by batch""",
    """insert into import_batches (id, name, status, total_files, completed_files, failed_files, cancelled_files,
                                   open_files, created_at, updated_at, completed_at)
       select batch_id, 'bench-cleanup-' || batch, 'completed', files, files, 0, 0, 0, at, at, at
         from seed_batches""",
    """insert into documents (id, batch_id, source_name, content_sha256, byte_size, status, index_generation_id,
                              page_count, section_count, chunk_count, created_at, updated_at)
       select s.document_id, b.batch_id, 'live-' || s.g || '.txt',
              encode(sha256(convert_to('live/' || s.g, 'UTF8')), 'hex'), 64, 'indexed', s.generation_id,
              1, 1, %(live_chunks)s, b.at, b.at
         from seed_docs s join seed_batches b using (batch)""",
    """insert into index_generations (id, document_id, status, page_count, section_count, chunk_count,
                                      created_at, committed_at)
       select s.generation_id, s.document_id, 'committed', 1, 1, %(live_chunks)s, b.at, b.at
         from seed_docs s join seed_batches b using (batch)""",
    """insert into document_pages (document_id, index_generation_id, ordinal, content)
       select document_id, generation_id, 0, 'page of document ' || g from seed_docs""",
    """insert into document_sections (document_id, index_generation_id, ordinal, heading, content)
       select document_id, generation_id, 0, 'Document ' || g, 'section of document ' || g from seed_docs""",
    """insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count)
       select s.document_id, s.generation_id, o, 'live chunk ' || o || ' of document ' || s.g, 6
         from seed_docs s cross join generate_series(0, %(live_chunks)s - 1) o""",
    """insert into ingestion_jobs (document_id, batch_id, status, stage, progress, attempt_count, next_run_at,
                                   started_at, completed_at, created_at, updated_at)
       select s.document_id, b.batch_id, 'completed', 'indexed', 100, 1, b.at, b.at, b.at, b.at, b.at
         from seed_docs s join seed_batches b using (batch)""",
    """create temporary table seed_abandoned on commit drop as
       select document_id, gen_random_uuid() as generation_id from seed_docs where abandoned""",
    """insert into index_generations (id, document_id, status, lease_token)
       select generation_id, document_id, 'abandoned', 1 from seed_abandoned""",
    """insert into document_pages (document_id, index_generation_id, ordinal, content)
       select document_id, generation_id, 0, 'abandoned page' from seed_abandoned""",
    """insert into document_sections (document_id, index_generation_id, ordinal, heading, content)
       select document_id, generation_id, 0, 'Abandoned', 'abandoned section' from seed_abandoned""",
    """insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count)
       select a.document_id, a.generation_id, o,
              'abandoned chunk ' || o || ' of a build that never committed: lease fence worker queue', 12
         from seed_abandoned a cross join generate_series(0, %(abandoned_chunks)s - 1) o""",
]

# --mode zero: every document keeps its uploaded bytes, as an enqueue leaves them (until the
# document is deleted and purged). Same transaction as SCALE_SEED_SQL (it reads seed_docs).
SCALE_SOURCES_SQL = """insert into document_sources (document_id, content)
       select document_id, convert_to('live/' || g, 'UTF8') from seed_docs"""

# The seed is valid: what the foreign keys would have checked, checked once.
SCALE_CHECK_SQL = """
select (select count(*) from documents) as documents,
       (select count(*) from index_generations where status = 'committed') as committed,
       (select count(*) from index_generations where status <> 'committed') as uncommitted,
       (select count(*) from document_chunks) as chunks,
       (select count(*) from document_pages) + (select count(*) from document_sections) as pages_sections,
       (select count(*) from documents d where not exists (select 1 from index_generations g
                                                             where g.id = d.index_generation_id
                                                               and g.document_id = d.id
                                                               and g.status = 'committed')) as bad_documents,
       (select count(*) from document_chunks c where not exists (select 1 from index_generations g
                                                                  where g.id = c.index_generation_id
                                                                    and g.document_id = c.document_id)) as bad_chunks,
       (select count(*) from ingestion_jobs j where not exists (select 1 from documents d
                                                                 where d.id = j.document_id)) as bad_jobs,
       (select count(*) from document_pages p where not exists (select 1 from index_generations g
                                                                 where g.id = p.index_generation_id
                                                                   and g.document_id = p.document_id))
     + (select count(*) from document_sections s where not exists (select 1 from index_generations g
                                                                    where g.id = s.index_generation_id
                                                                      and g.document_id = s.document_id))
       as bad_pages_sections,
       (select count(*) from document_sources) as sources,
       (select count(*) from import_batches) as batches,
       (select count(*) from import_batches b
          left join (select batch_id, count(*) as total, count(*) filter (where status = 'completed') as completed
                       from ingestion_jobs group by batch_id) c on c.batch_id = b.id
         where (b.status, b.total_files, b.completed_files, b.failed_files, b.cancelled_files, b.open_files)
               is distinct from ('completed', c.total, c.total, 0, 0, 0)
            or c.completed is distinct from c.total) as bad_batches
"""

# What is left after the passes: no abandoned generation or chunk; every live row kept.
SCALE_AFTER_SQL = """
select (select count(*) from index_generations where status <> 'committed') as uncommitted,
       (select count(*) from document_chunks c join documents d on d.id = c.document_id
         where c.index_generation_id is distinct from d.index_generation_id)
     + (select count(*) from document_pages p join documents d on d.id = p.document_id
         where p.index_generation_id is distinct from d.index_generation_id)
     + (select count(*) from document_sections s join documents d on d.id = s.document_id
         where s.index_generation_id is distinct from d.index_generation_id) as stray_artifacts,
       (select count(*) from document_pages) + (select count(*) from document_sections) as pages_sections,
       (select count(*) from index_generations where status = 'committed') as committed,
       (select count(*) from document_chunks) as chunks,
       (select count(*) from documents where index_generation_id is null) as documents_without_generation
"""

TABLES_READ = (
    "documents",
    "index_generations",
    "ingestion_jobs",
    "document_pages",
    "document_sections",
    "document_chunks",
)


def seed_scale(
    uri: str,
    live: int,
    *,
    abandoned: int,
    live_chunks: int,
    abandoned_chunks: int,
    per_batch: int | None = None,
    sources: bool = False,
) -> dict:
    """`live` indexed documents (+ `abandoned` with abandoned work), one batch per `per_batch`
    documents (default: one batch for all), with their stored bytes if `sources`; seeded
    and checked."""
    total = live + abandoned
    per_batch = per_batch or total
    params = {
        "live": live,
        "abandoned": abandoned,
        "live_chunks": live_chunks,
        "abandoned_chunks": abandoned_chunks,
        "per_batch": per_batch,
    }
    with connect(uri) as conn:
        began = time.perf_counter()
        with conn.transaction():
            for sql in SCALE_SEED_SQL + ([SCALE_SOURCES_SQL] if sources else []):
                conn.execute(sql, params)
        for table in (
            "import_batches",
            "documents",
            "index_generations",
            "document_pages",
            "document_sections",
            "document_chunks",
            "ingestion_jobs",
            "document_sources",
        ):
            conn.execute(f"vacuum (analyze) {table}")
        conn.execute("checkpoint")
        seconds = time.perf_counter() - began
        check = conn.execute(SCALE_CHECK_SQL).fetchone()
    expected = {
        "documents": total,
        "committed": total,
        "uncommitted": abandoned,
        "chunks": total * live_chunks + abandoned * abandoned_chunks,
        "pages_sections": 2 * (total + abandoned),
        "bad_documents": 0,
        "bad_chunks": 0,
        "bad_jobs": 0,
        "bad_pages_sections": 0,
        "sources": total if sources else 0,
        "batches": -(-total // per_batch),
        "bad_batches": 0,
    }
    assert check == expected, (check, expected)
    return {"seconds": seconds, **check}


def load_auto_explain(conn, fmt: str, notices: list[str]) -> None:
    """auto_explain on this connection: each statement's plan (nested statements too) with
    ANALYZE, as a notice appended to `notices`, once auto_explain.log_min_duration is set
    to 0 (it starts off: -1)."""
    conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    conn.execute("load 'auto_explain'")
    for setting, value in [
        ("log_nested_statements", "on"),
        ("log_analyze", "on"),
        ("log_buffers", "on"),
        ("log_timing", "on"),
        ("log_triggers", "on"),
        ("log_format", fmt),
        ("log_level", "notice"),
        ("log_min_duration", "-1"),
    ]:
        conn.execute(f"set auto_explain.{setting} = {value}")


def explain_passes(uri: str, args, fmt: str) -> dict[int, list[str]]:
    """The passes numbered in --explain-passes, run on one connection in one transaction
    that is rolled back, every statement's plan captured with auto_explain (nested
    statements included: the pass's own and the foreign-key actions they fire). A later
    pass shows the plan a long cleanup settles on: plpgsql caches its statements' plans,
    and after five runs may switch to a generic plan."""
    from ingestion_pipeline.db.rpc import IngestionRpc

    wanted = sorted({int(n) for n in args.explain_passes.split(",")})
    notices: list[str] = []
    plans: dict[int, list[str]] = {}
    with connect(uri) as conn:
        load_auto_explain(conn, fmt, notices)
        rpc = IngestionRpc(conn)
        with conn.transaction(force_rollback=True):
            for number in range(1, wanted[-1] + 1):
                conn.execute(f"set auto_explain.log_min_duration = {0 if number in wanted else -1}")
                notices.clear()
                rpc.cleanup_generations(limit=args.limit, dry_run=False)
                if number in wanted:
                    plans[number] = [n for n in notices if "plan:" in n]
    return plans


def plan_reads(notice: str, tables: tuple[str, ...] = TABLES_READ) -> dict:
    """From one auto_explain JSON notice: the statement, its time, the rows its plan nodes
    read from each table (actual rows x loops), the rows they examined (those plus the rows
    their filters and rechecks removed, x loops: EXPLAIN shows removals per loop), the
    tables its plan scans sequentially and, of those, the ones a scan of which ran."""
    plan = json.loads(notice.split("plan:", 1)[1])
    reads = dict.fromkeys(tables, 0)
    examined = dict.fromkeys(tables, 0)
    seq: set[str] = set()
    seq_run: set[str] = set()

    def walk(node: dict) -> None:
        relation = node.get("Relation Name")
        if node.get("Node Type") == "Seq Scan" and relation and node.get("Actual Loops", 1) > 0:
            seq_run.add(relation)
        if relation in reads:
            loops = node.get("Actual Loops", 1)
            reads[relation] += int(node.get("Actual Rows", 0) * loops)
            examined[relation] += int(
                (
                    node.get("Actual Rows", 0)
                    + node.get("Rows Removed by Filter", 0)
                    + node.get("Rows Removed by Index Recheck", 0)
                )
                * loops
            )
            if node.get("Node Type") == "Seq Scan":
                seq.add(relation)
        elif node.get("Node Type") == "Seq Scan" and relation:
            seq.add(relation)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    text = " ".join(plan.get("Query Text", "").split())
    return {
        "query": text,
        "ms": plan.get("Execution Time", plan["Plan"].get("Actual Total Time", 0.0)),
        "reads": reads,
        "examined": examined,
        "seq": sorted(seq),
        "seq_run": sorted(seq_run),
    }


def statement_label(text: str) -> str:
    """A short name for a statement of the pass (or of a foreign-key action it fired)."""
    lowered = text.lower()
    if lowered.startswith("select coalesce(array_agg(candidate"):
        return "candidates (select distinct ... limit)"
    if lowered.startswith("delete from public."):
        return "delete " + lowered.split()[2].removeprefix("public.")
    if "ri_constraint" in lowered or lowered.startswith(("update only", "delete from only", "select 1 from only")):
        return "FK: " + " ".join(text.split()[:5])
    return " ".join(text.split()[:6])


def run_scale(args) -> None:
    sizes = [int(n) for n in args.live.split(",")]
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        template = "bench_cleanup_scale_template"
        print(
            f"schema: migrated up to "
            f"{schema_version(create_database(server_uri, template, migrate=True, target=args.target))}"
        )
        uris = {}
        seeds = {}
        for live in sizes:
            uris[live] = clone_database(server_uri, template, f"bench_cleanup_live_{live}")
            seeds[live] = seed_scale(
                uris[live],
                live,
                abandoned=args.abandoned,
                live_chunks=args.live_chunks,
                abandoned_chunks=args.abandoned_chunks,
            )
            print(
                f"seeded {live} live documents + {args.abandoned} with abandoned work ({seeds[live]['chunks']} "
                f"chunk rows, {args.abandoned * args.abandoned_chunks} abandoned) in {seeds[live]['seconds']:.1f}s",
                flush=True,
            )

        # Plans first (rolled back: the work to clean stays the same).
        plan_rows, plan_texts = [], []
        for live in sizes:
            for number, notices in explain_passes(uris[live], args, "json").items():
                statements: dict[str, dict] = {}  # by query text: a foreign-key action runs once per deleted row
                for notice in notices:
                    read = plan_reads(notice)
                    if read["query"].lower().startswith("select cleanup_abandoned"):
                        continue  # the top-level call: its nested statements are listed one by one
                    seen = statements.setdefault(
                        read["query"], {"calls": 0, "ms": 0.0, "seq": set(), "reads": dict.fromkeys(TABLES_READ, 0)}
                    )
                    seen["calls"] += 1
                    seen["ms"] += read["ms"]
                    seen["seq"] |= set(read["seq"])
                    for table in TABLES_READ:
                        seen["reads"][table] += read["reads"][table]
                total = live + args.abandoned
                for query, seen in statements.items():
                    whole = [t for t in ("documents", "index_generations") if seen["reads"][t] >= total]
                    plan_rows.append(
                        [
                            live,
                            number,
                            statement_label(query),
                            seen["calls"],
                            f"{seen['ms']:.2f}",
                            *[seen["reads"][t] for t in TABLES_READ],
                            ",".join(sorted(seen["seq"])) or "-",
                            ",".join(whole) or "-",
                        ]
                    )
            if args.plans:
                for number, notices in explain_passes(uris[live], args, "text").items():
                    texts: dict[str, str] = {}
                    for notice in notices:
                        query = notice.split("Query Text:", 1)[-1].split("\n", 1)[0]
                        texts.setdefault(query, notice)  # a foreign-key action's first call stands for all
                    plan_texts.append((live, number, list(texts.values())))

        # The timed passes, alternating between the databases.
        from ingestion_pipeline.db.rpc import IngestionRpc

        conns = {live: connect(uris[live]) for live in sizes}
        try:
            passes = {live: [] for live in sizes}
            cleaned = {live: {"documents": 0, "chunks": 0, "generations": 0} for live in sizes}
            active = list(sizes)
            while active:
                for live in list(active):
                    rpc = IngestionRpc(conns[live])
                    began = time.perf_counter()
                    result = rpc.cleanup_generations(limit=args.limit, dry_run=False)
                    elapsed = time.perf_counter() - began
                    if result.documents == 0:
                        active.remove(live)
                        continue
                    passes[live].append(elapsed)
                    for key in cleaned[live]:
                        cleaned[live][key] += getattr(result, key)
            after = {live: conns[live].execute(SCALE_AFTER_SQL).fetchone() for live in sizes}
        finally:
            for conn in conns.values():
                conn.close()
        for live in sizes:
            total = live + args.abandoned
            assert after[live] == {
                "uncommitted": 0,
                "stray_artifacts": 0,
                "pages_sections": 2 * total,
                "committed": total,
                "chunks": total * args.live_chunks,
                "documents_without_generation": 0,
            }, after[live]
            assert cleaned[live]["generations"] == args.abandoned, cleaned[live]
            assert cleaned[live]["chunks"] == args.abandoned * args.abandoned_chunks, cleaned[live]

        base = percentile(passes[sizes[0]], 50)
        print_table(
            f"cleanup pass with N live documents present, the same abandoned work in each: {args.abandoned} "
            f"documents x {args.abandoned_chunks} chunks, limit={args.limit} documents/pass, passes "
            "alternating between the databases",
            [
                "live documents",
                "documents",
                "chunk rows",
                "passes",
                "generations deleted",
                "chunks deleted",
                "pass p50 ms",
                "pass p99 ms",
                "pass max ms",
                "p50 / first",
                "passes 1-5 p50 ms",
                "passes 6+ p50 ms",
            ],
            [
                [
                    live,
                    live + args.abandoned,
                    seeds[live]["chunks"],
                    len(passes[live]),
                    cleaned[live]["generations"],
                    cleaned[live]["chunks"],
                    ms(percentile(passes[live], 50)),
                    ms(percentile(passes[live], 99)),
                    ms(max(passes[live])),
                    f"{percentile(passes[live], 50) / base:.2f}",
                    ms(percentile(passes[live][:5], 50)),
                    ms(percentile(passes[live][5:], 50)),
                ]
                for live in sizes
            ],
        )
        print(
            "(plpgsql plans a statement afresh for its first five runs on a connection, then may keep a generic "
            "plan: the last two columns split the passes there)"
        )
        print_table(
            "statements of passes " + args.explain_passes + " (auto_explain, ANALYZE, one connection, "
            "rolled back): rows read per table (actual rows x loops over the plan's nodes)",
            [
                "live documents",
                "pass",
                "statement",
                "calls",
                "ms",
                "documents rows",
                "generations rows",
                "jobs rows",
                "pages rows",
                "sections rows",
                "chunks rows",
                "seq scans",
                "read >= all docs",
            ],
            plan_rows,
        )
        for live, number, notices in plan_texts:
            for notice in notices:
                print(f"\n## plan, {live} live documents, pass {number}\n\n{notice}")


# -- --mode zero ----------------------------------------------------------------------------

# The janitor's calls when there is nothing to do (run_janitor: expire, stuck, drifted, then
# the cleanup's dry run, which finds nothing and stops), and the cleanup itself with nothing
# to delete. Each: its SQL, and the answer's key that must be 0.
ZERO_CALLS = {
    "expire_stale_ingestion_jobs(300)": (
        "select expire_stale_ingestion_jobs(p_stale_after_seconds => 300) as r",
        "expired",
    ),
    "refresh_stuck_import_batches(L)": ("select refresh_stuck_import_batches(p_limit => %(limit)s) as r", "refreshed"),
    "refresh_drifted_import_batches(L)": (
        "select refresh_drifted_import_batches(p_limit => %(limit)s) as r",
        "refreshed",
    ),
    "cleanup(L, dry run)": (
        "select cleanup_abandoned_document_index_generations(p_limit => %(limit)s, p_dry_run => true) as r",
        "documents",
    ),
    "cleanup(L, not dry run)": (
        "select cleanup_abandoned_document_index_generations(p_limit => %(limit)s, p_dry_run => false) as r",
        "documents",
    ),
}
JANITOR_PASS = (
    "expire_stale_ingestion_jobs(300)",
    "refresh_stuck_import_batches(L)",
    "refresh_drifted_import_batches(L)",
    "cleanup(L, dry run)",
)
ZERO_TABLES = ("documents", "index_generations", "ingestion_jobs", "import_batches", "document_sources")


def zero_call(conn, name: str, limit: int) -> float:
    """One call of ZERO_CALLS[name]; its seconds. Asserts that it found nothing."""
    sql, key = ZERO_CALLS[name]
    began = time.perf_counter()
    answer = conn.execute(sql, {"limit": limit}).fetchone()["r"]
    elapsed = time.perf_counter() - began
    assert answer["ok"] and answer[key] == 0, (name, answer)
    return elapsed


def explain_zero_calls(uri: str, limit: int, warmup: int) -> dict[str, dict]:
    """Each call of ZERO_CALLS on one connection in a transaction that is rolled back:
    `warmup` runs unlogged (plpgsql may settle on generic plans), then one with auto_explain
    (ANALYZE, nested statements). Per call: its time and, summed over its nested statements,
    the rows examined per table and the tables scanned sequentially."""
    notices: list[str] = []
    facts: dict[str, dict] = {}
    with connect(uri) as conn:
        load_auto_explain(conn, "json", notices)
        with conn.transaction(force_rollback=True):
            for name in ZERO_CALLS:
                for _ in range(warmup):
                    zero_call(conn, name, limit)
                conn.execute("set auto_explain.log_min_duration = 0")
                notices.clear()
                zero_call(conn, name, limit)
                conn.execute("set auto_explain.log_min_duration = -1")
                # auto_explain logs a statement when it ends: the call itself comes last
                *nested, top = [plan_reads(n, ZERO_TABLES) for n in notices if "plan:" in n]
                seen = {
                    "ms": top["ms"],
                    "statements": len(nested),
                    "seq": set(),
                    "examined": dict.fromkeys(ZERO_TABLES, 0),
                }
                for read in nested:
                    seen["seq"] |= set(read["seq_run"])
                    for table in ZERO_TABLES:
                        seen["examined"][table] += read["examined"][table]
                facts[name] = seen
    return facts


def run_zero(args) -> None:
    sizes = [int(n) for n in args.live.split(",")]
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        template = "bench_cleanup_zero_template"
        print(
            f"schema: migrated up to "
            f"{schema_version(create_database(server_uri, template, migrate=True, target=args.target))}"
        )
        uris, seeds = {}, {}
        for live in sizes:
            uris[live] = clone_database(server_uri, template, f"bench_cleanup_zero_{live}")
            seeds[live] = seed_scale(
                uris[live],
                live,
                abandoned=0,
                live_chunks=args.live_chunks,
                abandoned_chunks=0,
                per_batch=args.per_batch,
                sources=True,
            )
            print(
                f"seeded {live} live documents (with their bytes), {seeds[live]['batches']} completed batches "
                f"({args.per_batch} documents each), nothing to clean, in {seeds[live]['seconds']:.1f}s",
                flush=True,
            )

        facts = {live: explain_zero_calls(uris[live], args.limit, args.warmup) for live in sizes}

        # The timed calls: one connection per database (as a janitor keeps one), round-robin
        # over the databases, the first --warmup rounds untimed.
        times = {live: {name: [] for name in ZERO_CALLS} for live in sizes}
        conns = {live: connect(uris[live]) for live in sizes}
        try:
            for round_ in range(args.warmup + args.repeat):
                for live in sizes:
                    for name in ZERO_CALLS:
                        elapsed = zero_call(conns[live], name, args.limit)
                        if round_ >= args.warmup:
                            times[live][name].append(elapsed)
        finally:
            for conn in conns.values():
                conn.close()
        for live in sizes:
            times[live]["janitor pass: the first four"] = [
                sum(parts) for parts in zip(*(times[live][name] for name in JANITOR_PASS), strict=True)
            ]

        rows = []
        for name in times[sizes[0]]:
            base = percentile(times[sizes[0]][name], 50)
            for live in sizes:
                t = times[live][name]
                rows.append(
                    [
                        name,
                        live,
                        seeds[live]["batches"],
                        len(t),
                        ms(percentile(t, 50)),
                        ms(percentile(t, 99)),
                        ms(max(t)),
                        f"{percentile(t, 50) / base:.2f}",
                    ]
                )
        print_table(
            f"the janitor with nothing to clean: N live indexed documents (one completed job each, "
            f"{args.per_batch} per completed batch), 0 candidates, L={args.limit}; {args.repeat} timed calls "
            f"each after {args.warmup} untimed, round-robin over the databases",
            ["call", "live documents", "batches", "calls", "p50 ms", "p99 ms", "max ms", f"p50 / {sizes[0]}"],
            rows,
        )
        print_table(
            f"plans of one call each (auto_explain, ANALYZE, after {args.warmup} untimed calls on the "
            "connection, rolled back): rows examined per table over the call's nested statements "
            "(actual rows + rows removed by filter or recheck, x loops) and the sequential scans that ran",
            ["call", "live documents", "ms (analyze)", "statements", *[f"{t} rows" for t in ZERO_TABLES], "seq scans"],
            [
                [
                    name,
                    live,
                    f"{facts[live][name]['ms']:.2f}",
                    facts[live][name]["statements"],
                    *[facts[live][name]["examined"][t] for t in ZERO_TABLES],
                    ",".join(sorted(facts[live][name]["seq"])) or "-",
                ]
                for name in ZERO_CALLS
                for live in sizes
            ],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--mode",
        choices=["indexing", "scale", "zero"],
        default="indexing",
        help="indexing: clean abandoned chunks while a worker indexes (default); scale: pass time "
        "with few vs many live documents present; zero: the janitor's calls with nothing to "
        "clean, with few vs many live documents present",
    )
    parser.add_argument(
        "--limit", type=int, default=100, help="documents per cleanup pass (default 100 = INGEST_CLEANUP_BATCH_SIZE)"
    )
    parser.add_argument(
        "--target",
        default=None,
        help="migrate only up to this migration version (default: head), e.g. 20261201000600 for "
        "the schema before migration 20261202000100",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="full size: indexing: --chunks 1000000 (its default); scale: --live 10000,1000000; "
        "zero: --live 10000,100000,1000000",
    )
    indexing = parser.add_argument_group("--mode indexing")
    indexing.add_argument("--chunks", type=int, default=1_000_000, help="abandoned chunk rows (default 1000000)")
    indexing.add_argument(
        "--chunks-per-doc", type=int, default=100, help="chunks per abandoned generation (default 100)"
    )
    indexing.add_argument(
        "--corpus-docs", type=int, default=200, help="documents the indexer keeps indexing (default 200)"
    )
    indexing.add_argument("--concurrency", type=int, default=2, help="indexer jobs in flight (default 2)")
    indexing.add_argument("--baseline-seconds", type=float, default=8, help="indexer alone before cleanup (default 8)")
    scale = parser.add_argument_group("--mode scale and --mode zero")
    scale.add_argument(
        "--live",
        default=None,
        help="live documents per database, comma-separated, smallest first (default 10000,100000)",
    )
    scale.add_argument("--live-chunks", type=int, default=1, help="chunk rows per live document (default 1)")
    scale.add_argument(
        "--abandoned",
        type=int,
        default=3000,
        help="documents with an abandoned generation, in every database (default 3000)",
    )
    scale.add_argument(
        "--abandoned-chunks", type=int, default=10, help="chunk rows per abandoned generation (default 10)"
    )
    scale.add_argument(
        "--explain-passes",
        default="1,7",
        help="passes whose plans are captured, on one connection (default 1,7: the first, and one "
        "after plpgsql may have switched to generic plans)",
    )
    scale.add_argument("--plans", action="store_true", help="also print every statement's plan (text)")
    zero = parser.add_argument_group("--mode zero")
    zero.add_argument("--per-batch", type=int, default=100, help="documents per completed batch (default 100)")
    zero.add_argument("--repeat", type=int, default=50, help="timed calls of each kind per size (default 50)")
    zero.add_argument(
        "--warmup",
        type=int,
        default=7,
        help="untimed calls of each kind first, per connection (default 7: past plpgsql's switch to generic plans)",
    )
    args = parser.parse_args()
    if args.full:
        args.chunks = 1_000_000
        args.live = args.live or ("10000,100000,1000000" if args.mode == "zero" else "10000,1000000")
    args.live = args.live or "10000,100000"

    print(f"$ {command_line()}")
    if args.mode == "scale":
        run_scale(args)
    elif args.mode == "zero":
        run_zero(args)
    else:
        run_indexing(args)


if __name__ == "__main__":
    main()
