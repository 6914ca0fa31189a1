"""Many worker processes on one server: what 1, 2, 4, 8 and 16 `ingest work` processes do
to the queue's throughput, the claim's latency, lock waits and the connections used.

Each process count P runs on a fresh scratch database (cloned from a migrated template)
seeded with the same number of pending no-op jobs (`common.seed_jobs`, --per-batch jobs
per import batch). P spawned processes each run the real claim loop
(`ingestion_pipeline.worker.Worker`, drain mode) with the no-op processor
(`worker/indexing.py:no_op`), on their own small connection pool (min 1, max --pool-size
connections), with `ingest work`'s defaults otherwise (concurrency 4, claim batch 10): the
numbers are the queue's (claims, heartbeats, bulk acknowledgements), not a parser's.

  jobs/s       completed jobs over the window from the first claim of any process to the
               last acknowledgement (complete_many that completed a job) of any process.
  claim ms     IngestionRpc.claim as the worker calls it, timed in each child by wrapping
               the method on the worker's client: the pool checkout (the pool checks an idle
               connection with one empty round trip) plus the claim statement. Every call
               counts, the empty ones at the end of a drain too. "checkout" is the pool
               checkout inside those claim calls alone (waiting for a free connection
               shows here). The samples come back to the parent on a multiprocessing queue.
  lock waits   a thread of the parent, on its own connection to the server's maintenance
               database (so not counted below), samples pg_stat_activity of the scratch
               database every --sample-ms ms: backends with wait_event_type = 'Lock'
               (heavyweight locks), and in the same statement the number of ungranted
               pg_locks entries of its backends. "waits seen" counts distinct
               (pid, query_start) pairs found waiting (a wait shorter than the interval is
               seen with probability ~ its length / interval, so this is a lower bound);
               "est. wait ms" = waiting backends summed over samples x interval, an
               estimate of the total time backends spent waiting on locks.
  connections  the peak number of client backends on the scratch database in any sample.

The connection budget is printed before anything runs: max_connections minus the reserved
slots (superuser_reserved_connections, reserved_connections) minus the client backends
already on the server, against processes x pool size + 1 (the sampler). A count that does
not fit is refused with one line and skipped.

Last, one row for Dagster drain runs (--dagster-runs, default 4: the default cap of
concurrent drain runs, INGEST_MAX_DRAIN_RUNS): that many spawned processes each run
`make_definitions(...).resolve_job_def("ingest_documents").execute_in_process(...)` (as
`ingest demo` does, on an ephemeral Dagster instance) with max_jobs = all jobs, so the runs
share the queue. The asset builds its own Worker; the bench replaces the `Worker` name in
`orchestration/assets.py` (in the child only) by a subclass that passes the no-op
processor and wraps the claim the same way. "run s" is that row's wall time from the
barrier to the last execute_in_process returning: Dagster's own cost per run is the
difference from the claim-to-ack window.

Server: the embedded one (a private PostgreSQL under a temp dir, stopped and deleted
after), or --database-url / DATABASE_URL: then the scratch databases are created on that
server (the role needs CREATEDB) and dropped after each count.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from common import (
    check_batches_completed,
    command_line,
    connect,
    create_database,
    db_uri,
    drop_database,
    embedded_server,
    machine_line,
    ms,
    percentile,
    print_table,
    seed_jobs,
    vacuum_analyze,
)
from many_workers_children import dagster_child, run_children, worker_child
from many_workers_sampler import Sampler, budget_line, connection_budget, refusal

TEMPLATE = "bench_many_template"


# -- one cell ---------------------------------------------------------------------------


@contextmanager
def server(database_url: str | None) -> Iterator[str]:
    if database_url:
        yield database_url
    else:
        with embedded_server() as uri:
            yield uri


def fresh_db(server_uri: str, name: str, args) -> tuple[str, float]:
    drop_database(server_uri, name)
    with connect(server_uri) as conn:
        conn.execute(f'create database "{name}" template "{TEMPLATE}"')
    uri = db_uri(server_uri, name)
    began = time.perf_counter()
    with connect(uri) as conn:
        seed_jobs(conn, args.jobs, per_batch=args.per_batch, tag=name)
        vacuum_analyze(conn)
        conn.execute("checkpoint")  # the seed's WAL is not flushed inside the timed window
    return uri, time.perf_counter() - began


def run_cell(server_uri: str, kind: str, processes: int, args) -> dict:
    name = f"bench_many_{kind}_{processes}"
    uri, seeded = fresh_db(server_uri, name, args)
    opts = {
        "concurrency": args.concurrency,
        "claim_batch": args.claim_batch,
        "pool_size": args.pool_size,
        "jobs": args.jobs,
    }
    load = os.getloadavg()[0]
    sampler = Sampler(server_uri, name, args.sample_ms / 1000)
    sampler.start()
    try:
        results, released = run_children(
            worker_child if kind == "workers" else dagster_child, uri, opts, processes, args.timeout
        )
    finally:
        sampler.stop()
    with connect(uri) as conn:
        check_batches_completed(conn, args.jobs)  # every job completed, every batch's counters exact
    if not args.keep:
        drop_database(server_uri, name)
    counts = Counter()
    for r in results:
        counts.update(r["counts"])
    claims = [c for r in results for c in r["claims"]]
    checkouts = [c for r in results for c in r["checkouts"]]
    first = min(r["first_claim"] for r in results if r["first_claim"] is not None)
    last = max(r["last_ack"] for r in results if r["last_ack"] is not None)
    window = last - first
    assert counts["completed"] == args.jobs, (kind, processes, dict(counts))
    cell = {
        "kind": kind,
        "processes": processes,
        "seconds": window,
        "rate": counts["completed"] / window,
        "claims": len(claims),
        "claim_p50": percentile(claims, 50),
        "claim_p99": percentile(claims, 99),
        "checkout_p99": percentile(checkouts, 99),
        "other": sum(v for k, v in counts.items() if k != "completed"),
        "sampler": sampler,
        "load": load,
        "run_seconds": max(r.get("returned", 0) for r in results) - released if kind == "dagster" else None,
    }
    label = f"{processes} processes" if kind == "workers" else f"dagster {processes} runs"
    print(
        f"  {label}: {counts['completed']} jobs in {window:.2f}s (seed {seeded:.1f}s), {len(claims)} claims, "
        f"{sampler.samples} samples, peak {sampler.peak_clients} connections, load {load:.2f}"
        f"{f', sampler error: {sampler.error}' if sampler.error else ''}",
        flush=True,
    )
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs seeded for every count (default 2000)")
    parser.add_argument("--counts", default="1,2,4,8,16", help="worker process counts (default 1,2,4,8,16)")
    parser.add_argument(
        "--dagster-runs",
        type=int,
        default=4,
        help="concurrent Dagster drain runs for the last row; 0: no Dagster row (default 4)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="jobs in flight per process (INGEST_WORKER_CONCURRENCY, default 4 as `ingest work`)",
    )
    parser.add_argument("--claim-batch", type=int, default=10, help="jobs per claim at most (default 10)")
    parser.add_argument(
        "--pool-size",
        type=int,
        default=6,
        help="connections per process at most (pool min 1; default 6 = concurrency + 2, the worker's own minimum)",
    )
    parser.add_argument("--per-batch", type=int, default=100, help="seeded jobs per import batch (default 100)")
    parser.add_argument(
        "--sample-ms", type=float, default=50, help="sampling interval of pg_stat_activity (default 50)"
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        help="run on this server (scratch databases; needs CREATEDB) instead of an embedded one "
        "(default: DATABASE_URL when set)",
    )
    parser.add_argument("--full", action="store_true", help="--jobs 20000")
    parser.add_argument("--keep", action="store_true", help="keep each count's scratch database")
    parser.add_argument("--timeout", type=float, default=1800, help="give up on a count after this many seconds")
    args = parser.parse_args()
    if args.full:
        args.jobs = 20000
    counts = [int(n) for n in args.counts.split(",") if n]

    print(f"$ {command_line()}")
    with server(args.database_url) as server_uri:
        print(machine_line(server_uri))
        print(
            f"server: {'DATABASE_URL / --database-url' if args.database_url else 'embedded, temp dir'}; "
            f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        budget = connection_budget(server_uri)
        print(budget_line(budget, counts, args.dagster_runs, args.pool_size), flush=True)
        create_database(server_uri, TEMPLATE, migrate=True)
        cells = []
        try:
            plan = [("workers", n) for n in counts] + ([("dagster", args.dagster_runs)] if args.dagster_runs else [])
            for kind, n in plan:
                refused = refusal(
                    f"{n} processes" if kind == "workers" else f"dagster {n} runs", n, args.pool_size, budget
                )
                if refused:
                    print(refused, flush=True)
                    continue
                cells.append(run_cell(server_uri, kind, n, args))
        finally:
            drop_database(server_uri, TEMPLATE)

    interval = f"{args.sample_ms:g} ms"
    print_table(
        f"{args.jobs} no-op jobs per count, concurrency {args.concurrency}, claim batch {args.claim_batch}, "
        f"pool {args.pool_size} per process; lock waits: pg_stat_activity wait_event_type = 'Lock' "
        f"sampled every {interval} (ungranted: pg_locks where not granted, same samples)",
        [
            "processes",
            "jobs/s",
            "seconds",
            "claims",
            "claim p50 ms",
            "claim p99 ms",
            "checkout p99 ms",
            "lock-wait samples",
            "waits seen",
            "est. wait ms",
            "peak waiting",
            "peak ungranted",
            "peak connections",
            "not completed",
            "load 1m",
        ],
        [
            [
                c["processes"] if c["kind"] == "workers" else f"dagster x{c['processes']}",
                f"{c['rate']:.0f}",
                f"{c['seconds']:.2f}",
                c["claims"],
                ms(c["claim_p50"]),
                ms(c["claim_p99"]),
                ms(c["checkout_p99"]),
                f"{c['sampler'].with_waiters}/{c['sampler'].samples}",
                len(c["sampler"].waits),
                f"{c['sampler'].waiting_backend_samples * args.sample_ms:.0f}",
                c["sampler"].peak_waiting,
                c["sampler"].peak_ungranted,
                c["sampler"].peak_clients,
                c["other"],
                f"{c['load']:.2f}",
            ]
            for c in cells
        ],
    )
    print_table(
        "lock waits seen, by the waiting statement's RPC and wait_event (distinct waits)",
        ["processes", "waits (rpc: wait_event count)"],
        [
            [
                c["processes"] if c["kind"] == "workers" else f"dagster x{c['processes']}",
                ", ".join(f"{rpc}: {event} {n}" for (rpc, event), n in c["sampler"].events.most_common()) or "-",
            ]
            for c in cells
        ],
    )
    for c in cells:
        if c["kind"] == "dagster":
            print(
                f"\ndagster x{c['processes']}: execute_in_process wall {c['run_seconds']:.2f}s (barrier to the last "
                f"run returned) against {c['seconds']:.2f}s from the first claim to the last acknowledgement"
            )
    print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
