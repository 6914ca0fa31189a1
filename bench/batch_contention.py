"""What the batch-row lock (R9) costs: complete N jobs with W worker processes when all N
jobs belong to ONE import batch, versus the same N jobs spread over many batches.

Every `complete_ingestion_job` ends with `refresh_import_batches`: it locks the batch row
(FOR NO KEY UPDATE) and then counts the batch's jobs, holding the lock until commit. With
one batch, every completion of every worker queues on that one row, and each count reads
the whole batch, so the critical section grows with the batch.

The loop is the one of queue_throughput.py (claim(limit=k), heartbeat, complete through
IngestionRpc). Each (layout, W) cell gets a fresh database cloned from a migrated template.
A second table times `refresh_import_batch_status` alone (the count under the lock) for a
batch of N jobs and for a batch of one.
"""

from __future__ import annotations

import argparse
import time

from common import (
    command_line,
    connect,
    create_database,
    db_uri,
    embedded_server,
    machine_line,
    ms,
    ours_worker,
    percentile,
    print_table,
    run_processes,
    seed_jobs,
    span,
    vacuum_analyze,
)


def fresh_db(server_uri: str, name: str) -> str:
    with connect(server_uri) as conn:
        conn.execute(f'drop database if exists "{name}"')
        conn.execute(f'create database "{name}" template bench_batch_template')
    return db_uri(server_uri, name)


def run_cell(server_uri: str, layout: str, per_batch: int, workers: int, args) -> dict:
    uri = fresh_db(server_uri, f"bench_batch_{layout}_{workers}")
    with connect(uri) as conn:
        seed_jobs(conn, args.jobs, per_batch=per_batch, tag=layout)
        vacuum_analyze(conn)
    results = run_processes(ours_worker, (uri, args.claim_batch, args.heartbeat), workers, args.timeout)
    completes = [c for r in results for c in r[4]]
    with connect(uri) as conn:
        counts = conn.execute("select count(*) filter (where status = 'completed') as done,"
                              " count(*) filter (where status <> 'completed') as not_done from import_batches"
                              ).fetchone()
        refresh = time_refresh(conn, args.samples)
    assert sum(r[0] for r in results) == args.jobs and counts["not_done"] == 0, counts
    seconds = span(results)
    return {"layout": layout, "workers": workers, "batches": counts["done"], "seconds": seconds,
            "rate": args.jobs / seconds, "p50": percentile(completes, 50), "p99": percentile(completes, 99),
            "refresh": refresh}


def time_refresh(conn, samples: int) -> float:
    """p50 of refresh_import_batch_status on the largest batch (all its jobs completed)."""
    batch_id = conn.execute("select batch_id from ingestion_jobs group by batch_id order by count(*) desc limit 1"
                            ).fetchone()["batch_id"]
    latencies = []
    for _ in range(samples):
        started = time.perf_counter()
        conn.execute("select refresh_import_batch_status(%s)", (batch_id,))
        latencies.append(time.perf_counter() - started)
    return percentile(latencies, 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=4000, help="jobs to complete per cell (default 4000)")
    parser.add_argument("--workers", default="1,2", help="worker process counts W (default 1,2)")
    parser.add_argument("--spread", type=int, default=1, help="jobs per batch in the spread layout (default 1)")
    parser.add_argument("--claim-batch", type=int, default=10, help="k, jobs per claim (default 10)")
    parser.add_argument("--no-heartbeat", dest="heartbeat", action="store_false", help="skip per-job heartbeats")
    parser.add_argument("--samples", type=int, default=50, help="timed refresh calls per cell (default 50)")
    parser.add_argument("--full", action="store_true", help="--jobs 10000 --workers 1,2,4")
    parser.add_argument("--timeout", type=float, default=1800, help="give up on a cell after this many seconds")
    args = parser.parse_args()
    if args.full:
        args.jobs, args.workers = 10000, "1,2,4"
    worker_counts = [int(w) for w in args.workers.split(",")]

    print(f"$ {command_line()}")
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        create_database(server_uri, "bench_batch_template", migrate=True)
        cells = []
        for workers in worker_counts:  # interleave the layouts at each W
            cells.append(run_cell(server_uri, "spread", args.spread, workers, args))
            cells.append(run_cell(server_uri, "one", args.jobs, workers, args))

        spread = {c["workers"]: c["rate"] for c in cells if c["layout"] == "spread"}
        print_table(f"completing {args.jobs} jobs: one batch vs {args.spread} job(s) per batch, k={args.claim_batch}",
                    ["layout", "W", "batches", "seconds", "jobs/s", "one / spread", "complete p50 ms",
                     "complete p99 ms", "refresh alone p50 ms"],
                    [[c["layout"], c["workers"], c["batches"], f"{c['seconds']:.2f}", f"{c['rate']:.0f}",
                      f"{c['rate'] / spread[c['workers']]:.2f}", ms(c["p50"]), ms(c["p99"]), ms(c["refresh"])]
                     for c in cells])


if __name__ == "__main__":
    main()
