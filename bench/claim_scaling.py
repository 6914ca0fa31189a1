"""Claim latency as the queue grows: p50/p99 of claim(limit=k) with P pending jobs for each
P in --sizes, with F finished jobs present throughout. The claim must stay index-driven.

One scratch database on a private embedded server. F completed jobs (of indexed
documents) are seeded first; then, for each size in increasing order, the pending jobs
are topped up to P with `insert ... select generate_series` and the tables are vacuumed
and analysed. Each sample is one `IngestionRpc.claim(worker_id, limit=k)` round trip;
after each sample the claimed jobs are put back to `pending` (bench-only SQL) so P stays
constant and the head of the queue churns as it does in production.

Plan evidence: the claim is plpgsql, so the plan of its statement is captured with
auto_explain (log_nested_statements, ANALYZE, BUFFERS, sent to this client as a NOTICE)
on one more real claim after the samples, i.e. the plan the RPC actually runs.
"""

from __future__ import annotations

import argparse
import time
import uuid

from common import (
    command_line,
    connect,
    create_database,
    embedded_server,
    machine_line,
    ms,
    percentile,
    print_table,
    seed_jobs,
    vacuum_analyze,
)

REQUEUE = """
update ingestion_jobs
   set status = 'pending', stage = 'queued', attempt_count = 0, locked_by = null, locked_at = null
 where id = any (%s)
"""

# What a split candidate query looks like (NOT the package's SQL; bench evidence only):
# the OR over two statuses becomes two branches, each walking its own partial index in
# claim order and locking as it goes (job and document, SKIP LOCKED), so the cost is O(k)
# however long the queue is. Timed inside a transaction that is rolled back.
SPLIT_CANDIDATES = """
with pending as (
    select j.id, j.next_run_at, j.created_at
      from ingestion_jobs j join documents d on d.id = j.document_id
     where j.status = 'pending' and j.next_run_at <= now() and j.attempt_count < j.max_attempts
     order by j.next_run_at, j.created_at
     limit %(limit)s
       for update of j, d skip locked
), stale as (
    select j.id, j.next_run_at, j.created_at
      from ingestion_jobs j join documents d on d.id = j.document_id
     where j.status = 'processing' and j.lease_expires_at < now()
       and j.locked_by is distinct from %(worker_id)s and j.attempt_count < j.max_attempts
     order by j.lease_expires_at
     limit %(limit)s
       for update of j, d skip locked
)
select id from (select * from pending union all select * from stale) c
 order by next_run_at, created_at
 limit %(limit)s
"""


def pending_count(conn) -> int:
    return conn.execute("select count(*) as n from ingestion_jobs where status = 'pending'").fetchone()["n"]


def sample_claims(rpc, conn, worker_id: str, limit: int, samples: int) -> list[float]:
    latencies = []
    for _ in range(samples):
        started = time.perf_counter()
        jobs = rpc.claim(worker_id, limit=limit)
        latencies.append(time.perf_counter() - started)
        assert len(jobs) == limit, f"claimed {len(jobs)} of {limit}"
        conn.execute(REQUEUE, ([j.job_id for j in jobs],))
    return latencies


def explain_claim(rpc, conn, worker_id: str, limit: int) -> str:
    """The plan the claim's statement runs inside plpgsql, via auto_explain."""
    notices: list[str] = []
    conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    conn.execute("load 'auto_explain'")
    for setting, value in [
        ("log_min_duration", "0"),
        ("log_nested_statements", "on"),
        ("log_analyze", "on"),
        ("log_buffers", "on"),
        ("log_timing", "on"),
        ("log_level", "notice"),
    ]:
        conn.execute(f"set auto_explain.{setting} = {value}")
    try:
        jobs = rpc.claim(worker_id, limit=limit)
    finally:
        conn.execute("set auto_explain.log_min_duration = -1")
    conn.execute(REQUEUE, ([j.job_id for j in jobs],))
    nested = [n for n in notices if "candidates" in n] or notices  # the statement inside the function
    return nested[0] if nested else "(auto_explain printed nothing)"


def timed_select(conn, sql: str, params: dict, samples: int) -> list[float]:
    """Client-side latency of one statement, each run in a transaction rolled back."""
    latencies = []
    for _ in range(samples):
        with conn.transaction(force_rollback=True):
            started = time.perf_counter()
            conn.execute(sql, params).fetchall()
            latencies.append(time.perf_counter() - started)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="pending-job counts, increasing (default 1000,10000,100000)"
    )
    parser.add_argument("--finished", type=int, default=100000, help="completed jobs present (default 100000)")
    parser.add_argument(
        "--limit", type=int, default=10, help="k, jobs per claim (default 10 = INGEST_CLAIM_BATCH_SIZE)"
    )
    parser.add_argument("--samples", type=int, default=200, help="claims timed per size (default 200)")
    parser.add_argument("--full", action="store_true", help="--sizes 1000,100000,1000000 --finished 1000000")
    parser.add_argument("--no-plans", dest="plans", action="store_false", help="do not print the plans")
    args = parser.parse_args()
    if args.full:
        args.sizes, args.finished = "1000,100000,1000000", 1_000_000
    sizes = sorted(int(s) for s in args.sizes.split(","))
    worker_id = f"bench:claim:{uuid.uuid4().hex[:8]}"

    print(f"$ {command_line()}")
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        uri = create_database(server_uri, "bench_claim", migrate=True)
        from ingestion_pipeline.db.rpc import IngestionRpc

        rows, plans = [], []
        with connect(uri) as conn, connect(uri) as side:
            rpc = IngestionRpc(conn)
            started = time.perf_counter()
            if args.finished:
                seed_jobs(side, args.finished, per_batch=1000, tag="done", status="completed")
            print(f"seeded {args.finished} finished jobs in {time.perf_counter() - started:.1f}s")
            for size in sizes:
                started = time.perf_counter()
                missing = size - pending_count(side)
                if missing > 0:
                    seed_jobs(side, missing, per_batch=1000, tag=f"p{size}")
                vacuum_analyze(side)
                seeded = time.perf_counter() - started
                sample_claims(rpc, side, worker_id, args.limit, 10)  # warm the plan cache
                claim = sample_claims(rpc, side, worker_id, args.limit, args.samples)
                params = {"limit": args.limit, "worker_id": worker_id}
                split = timed_select(side, SPLIT_CANDIDATES, params, args.samples)
                rows.append(
                    [
                        size,
                        args.finished,
                        pending_count(side),
                        f"{seeded:.1f}",
                        ms(percentile(claim, 50)),
                        ms(percentile(claim, 99)),
                        ms(max(claim)),
                        ms(percentile(split, 50)),
                    ]
                )
                if args.plans:
                    with side.transaction(force_rollback=True):
                        split_plan = "\n".join(
                            r["QUERY PLAN"]
                            for r in side.execute("explain (analyze, buffers, costs off) " + SPLIT_CANDIDATES, params)
                        )
                    plans.append((size, explain_claim(rpc, conn, worker_id, args.limit), split_plan))

        print_table(
            f"claim(limit={args.limit}) latency, {args.samples} samples per size (ms, client side)",
            [
                "pending",
                "finished",
                "pending after",
                "seed s",
                "claim p50",
                "claim p99",
                "claim max",
                "split-select p50",
            ],
            rows,
        )
        base = float(rows[0][4])
        print_table(
            "claim p50 relative to the smallest size",
            ["pending", "claim p50 / first"],
            [[r[0], f"{float(r[4]) / base:.2f}"] for r in rows],
        )
        for size, plan, split_plan in plans:
            print(f"\n## plan of the claim statement (auto_explain), {size} pending\n\n{plan}")
            print(f"\n## plan of the split candidate select (bench-only alternative), {size} pending\n\n{split_plan}")


if __name__ == "__main__":
    main()
