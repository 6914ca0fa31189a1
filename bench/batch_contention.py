"""What one big import batch costs: complete N jobs with W worker processes when all N jobs
belong to ONE import batch, versus the same N jobs spread over many batches.

Every transition moves its batch's counters (total, open, completed, failed) with one
UPDATE of the batch row, as the last statement of its transaction (migration
20261201000100). All completions of one batch therefore still queue on that one row lock,
but each holds it only for an O(1) update and the commit, not for a count of the batch.

Two worker loops (`--ack`), each a spawned process on one autocommit connection:

  bulk    what the worker does now: claim(limit=k), then with heartbeats one
          heartbeat_many for the k leases, then ONE complete_many for the k jobs (each job
          fenced by its lease token; each batch row moved once per call).
  single  the loop before bulk acknowledgement: claim(limit=k), then per job heartbeat and
          complete (one statement each; each moves its batch row).

Each (ack, layout, W) cell gets a fresh database cloned from a migrated template and
seeded with set-based SQL (the batches' counters set from the seeded jobs), and ends with
a check: every batch completed, its counters exact (total = completed = its jobs,
open = 0, failed = 0). "ack p50/p99" is one acknowledgement call: one job (single) or up
to k jobs (bulk). "refresh alone" is the repair path, `refresh_import_batch_status` (count
under the row lock), called on its own for the largest batch: what every completion paid
before the counters.
"""

from __future__ import annotations

import argparse
import time

from common import (
    check_batches_completed,
    command_line,
    connect,
    create_database,
    db_uri,
    embedded_server,
    machine_line,
    ms,
    ours_bulk_worker,
    ours_single_worker,
    percentile,
    print_table,
    run_processes,
    seed_jobs,
    span,
    vacuum_analyze,
)

WORKER_LOOPS = {"bulk": ours_bulk_worker, "single": ours_single_worker}


def fresh_db(server_uri: str, name: str) -> str:
    with connect(server_uri) as conn:
        conn.execute(f'drop database if exists "{name}"')
        conn.execute(f'create database "{name}" template bench_batch_template')
    return db_uri(server_uri, name)


def drop_db(server_uri: str, name: str) -> None:
    with connect(server_uri) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


def run_cell(server_uri: str, ack: str, layout: str, per_batch: int, workers: int, args) -> dict:
    name = f"bench_batch_{ack}_{layout}_{workers}"
    uri = fresh_db(server_uri, name)
    with connect(uri) as conn:
        began = time.perf_counter()
        seed_jobs(conn, args.jobs, per_batch=per_batch, tag=layout)
        drifted = conn.execute("select count(*) as n from drifted_import_batch_ids(%s)", (args.jobs,)).fetchone()
        assert drifted["n"] == 0, f"{drifted['n']} seeded batches with counters that disagree with their jobs"
        vacuum_analyze(conn)
        conn.execute("checkpoint")  # the seed's WAL is not flushed inside the timed window
        seeded = time.perf_counter() - began
    results = run_processes(WORKER_LOOPS[ack], (uri, args.claim_batch, args.heartbeat), workers, args.timeout)
    calls = [c for r in results for c in r[4]]
    with connect(uri) as conn:
        checked = check_batches_completed(conn, args.jobs)  # before the refresh below recounts a batch
        refresh = time_refresh(conn, args.samples)
    assert sum(r[0] for r in results) == args.jobs, results
    if not args.keep:
        drop_db(server_uri, name)
    seconds = span(results)
    print(
        f"  {ack:<6} {layout:<6} W={workers}: {args.jobs} jobs in {seconds:.2f}s (seed {seeded:.1f}s), "
        f"{checked['batches']} batch(es) completed, counters exact",
        flush=True,
    )
    return {
        "ack": ack,
        "layout": layout,
        "workers": workers,
        "batches": checked["batches"],
        "seconds": seconds,
        "rate": args.jobs / seconds,
        "calls": len(calls),
        "p50": percentile(calls, 50),
        "p99": percentile(calls, 99),
        "refresh": refresh,
    }


def time_refresh(conn, samples: int) -> float:
    """p50 of refresh_import_batch_status on the largest batch (all its jobs completed)."""
    batch_id = conn.execute(
        "select batch_id from ingestion_jobs group by batch_id order by count(*) desc limit 1"
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
    parser.add_argument(
        "--ack",
        choices=["bulk", "single", "both"],
        default="bulk",
        help="bulk: one complete_many per claim (the worker now); single: one complete per job "
        "(before); both: both loops, one table each (default bulk)",
    )
    parser.add_argument(
        "--no-heartbeat",
        dest="heartbeat",
        action="store_false",
        help="skip heartbeats (bulk: one heartbeat_many per claim; single: one per job)",
    )
    parser.add_argument("--samples", type=int, default=50, help="timed refresh calls per cell (default 50)")
    parser.add_argument("--full", action="store_true", help="--jobs 100000 --workers 1,2,4")
    parser.add_argument("--keep", action="store_true", help="keep each cell's database until the end of the run")
    parser.add_argument("--timeout", type=float, default=3600, help="give up on a cell after this many seconds")
    args = parser.parse_args()
    if args.full:
        args.jobs, args.workers = 100000, "1,2,4"
    worker_counts = [int(w) for w in args.workers.split(",")]
    acks = ["bulk", "single"] if args.ack == "both" else [args.ack]

    print(f"$ {command_line()}")
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        create_database(server_uri, "bench_batch_template", migrate=True)
        cells = []
        for workers in worker_counts:  # interleave the layouts (and the loops) at each W
            for ack in acks:
                cells.append(run_cell(server_uri, ack, "spread", args.spread, workers, args))
                cells.append(run_cell(server_uri, ack, "one", args.jobs, workers, args))

        spread = {(c["ack"], c["workers"]): c["rate"] for c in cells if c["layout"] == "spread"}
        one = {(c["ack"], c["workers"]): c["rate"] for c in cells if c["layout"] == "one"}
        heartbeats = "heartbeats on" if args.heartbeat else "no heartbeats"
        for ack in acks:
            loop = (
                f"claim k, {'heartbeat_many + ' if args.heartbeat else ''}one complete_many per claim"
                if ack == "bulk"
                else f"claim k, per job {'heartbeat + ' if args.heartbeat else ''}complete"
            )
            print_table(
                f"{ack} acks ({loop}): completing {args.jobs} jobs, one batch vs {args.spread} job(s) per "
                f"batch, k={args.claim_batch}, {heartbeats}",
                [
                    "layout",
                    "W",
                    "batches",
                    "seconds",
                    "jobs/s",
                    "one / spread",
                    "ack calls",
                    "ack p50 ms",
                    "ack p99 ms",
                    "refresh alone p50 ms",
                ],
                [
                    [
                        c["layout"],
                        c["workers"],
                        c["batches"],
                        f"{c['seconds']:.2f}",
                        f"{c['rate']:.0f}",
                        f"{c['rate'] / spread[(ack, c['workers'])]:.2f}",
                        c["calls"],
                        ms(c["p50"]),
                        ms(c["p99"]),
                        ms(c["refresh"]),
                    ]
                    for c in cells
                    if c["ack"] == ack
                ],
            )
        print_table(
            f"one batch / spread, jobs/s ratio per W ({args.jobs} jobs)",
            ["W", *[f"{ack}: one / spread" for ack in acks], *(["one batch: bulk / single"] if len(acks) == 2 else [])],
            [
                [
                    w,
                    *[f"{one[(ack, w)] / spread[(ack, w)]:.2f}" for ack in acks],
                    *([f"{one[('bulk', w)] / one[('single', w)]:.2f}"] if len(acks) == 2 else []),
                ]
                for w in worker_counts
            ],
        )


if __name__ == "__main__":
    main()
