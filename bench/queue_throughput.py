"""No-op job throughput: our fenced claim -> heartbeat -> complete loop versus PgQueuer,
Procrastinate and a pgbench one-row-update ceiling, on one embedded server, in one run.

Each system gets its own scratch database on the same server and W worker processes
(multiprocessing, spawn). Rounds are interleaved (ours, pgqueuer, procrastinate, ours, ...)
so that a noisy neighbour hurts every system alike; the table shows the median round.

  ours        IngestionRpc on one autocommit connection per process: claim(limit=k), then
              per job heartbeat(job, worker_id) and complete(job, worker_id) (fenced,
              refreshes the job's import batch under its row lock, R9).
  ours (worker)  the real Worker claim loop (ingestion_pipeline.worker.Worker) with the
              no-op processor: claim(limit=k) into 2k job threads, one heartbeat thread
              renewing all leases per interval, and buffered bulk acknowledgement (jobs
              that finish together are completed in one complete_many statement).
  ours_worker_prepared  the same with INGEST_PREPARE_THRESHOLD=5 (server-side prepared
              statements, as psycopg does by default; direct connections only): what the
              pooler-safe default costs.
  ours (sql)  the same three plpgsql functions called with one plain statement each,
              without the client (no BEGIN/COMMIT around fenced calls, no pydantic): what
              the SQL costs on its own.
  pgqueuer    QueueManager on a psycopg AsyncConnection (PsycopgDriver), drain mode,
              batch_size=k, no-op async entrypoint.
  procrastinate  App(PsycopgConnector), run_worker_async(wait=False, concurrency=k),
              no-op async task.
  pgbench     W clients, each transaction one UPDATE of a random row of a 1000-row table:
              one commit per job is the least any durable queue can do per job.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import tempfile
import time
import uuid

from common import (
    command_line,
    connect,
    create_database,
    db_uri,
    embedded_server,
    machine_line,
    median,
    ours_worker,
    postgres_bin,
    print_table,
    run,
    run_processes,
    seed_jobs,
    span,
    vacuum_analyze,
)
from queue_peers import PgQueuer, Procrastinate, pgqueuer_worker, procrastinate_worker, put_result

SYSTEMS = ("ours", "ours_worker", "ours_worker_prepared", "ours_sql", "pgqueuer", "procrastinate")


# -- worker processes (top level: spawned) ----------------------------------------------


OURS_SQL = {
    "claim": "select job_id, document_id, batch_id from claim_ingestion_jobs(%s, %s, 300)",
    "heartbeat": "select heartbeat_ingestion_job(%s, %s)",
    "complete": "select complete_ingestion_job(p_job_id => %s, p_document_id => %s, p_batch_id => %s,"
    " p_worker_id => %s)",
}


def ours_sql_worker(uri: str, k: int, heartbeat: bool, barrier, out) -> None:
    import psycopg

    worker_id = f"bench:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    with psycopg.connect(uri, autocommit=True, prepare_threshold=0) as conn:
        barrier.wait()
        started, count = time.monotonic(), 0
        while jobs := conn.execute(OURS_SQL["claim"], (worker_id, k)).fetchall():
            for job_id, document_id, batch_id in jobs:
                if heartbeat:
                    conn.execute(OURS_SQL["heartbeat"], (job_id, worker_id))
                conn.execute(OURS_SQL["complete"], (job_id, document_id, batch_id, worker_id))
                count += 1
    put_result(out, count, started)


def ours_worker_loop(uri: str, k: int, heartbeat: bool, barrier, out, prepare_threshold: int | None = None) -> None:
    """The real Worker, no-op processor, k jobs per claim and 2k in flight (the next claim
    overlaps the acknowledgement of the previous one), drain mode, default settings: no
    server-side prepared statements (safe behind a transaction-mode pooler)."""
    from ingestion_pipeline.db.connection import make_pool
    from ingestion_pipeline.settings import load_settings
    from ingestion_pipeline.worker import Worker
    from ingestion_pipeline.worker.indexing import no_op

    settings = load_settings(
        database_url=uri,
        worker_concurrency=2 * k,
        claim_batch_size=k,
        pool_min_size=2,
        pool_max_size=2 * k + 2,
        heartbeat_interval_seconds=30 if heartbeat else 3600,
        stale_after_seconds=300 if heartbeat else 86400,
        prepare_threshold=prepare_threshold,
    )
    pool = make_pool(uri, settings, application_name="bench-worker")
    try:
        worker = Worker(pool, settings, label="bench", processor=no_op, poll_seconds=0.05)
        barrier.wait()
        started = time.monotonic()
        report = worker.run(drain=True)
    finally:
        pool.close()
    put_result(out, report.counts["completed"], started)


def ours_worker_prepared_loop(uri: str, k: int, heartbeat: bool, barrier, out) -> None:
    """As ours_worker, with INGEST_PREPARE_THRESHOLD=5 (psycopg's default; direct connections only)."""
    ours_worker_loop(uri, k, heartbeat, barrier, out, prepare_threshold=5)


WORKERS = {
    "ours": ours_worker,
    "ours_worker": ours_worker_loop,
    "ours_worker_prepared": ours_worker_prepared_loop,
    "ours_sql": ours_sql_worker,
    "pgqueuer": pgqueuer_worker,
    "procrastinate": procrastinate_worker,
}


def run_workers(system: str, uri: str, args) -> tuple[int, float, float]:
    """W processes; the clock runs from the first start after the barrier to the last end."""
    results = run_processes(WORKERS[system], (uri, args.claim_batch, args.heartbeat), args.workers, args.timeout)
    count = sum(r[0] for r in results)
    cpu = sum(r[3] for r in results)  # client CPU seconds (start-up included)
    return count, span(results), cpu


# -- per-system set-up (one scratch database each, fresh jobs every round) ---------------


class Ours:
    def __init__(self, server_uri: str, name: str = "bench_ours"):
        self.server_uri = server_uri
        self.template = create_database(server_uri, f"{name}_template", migrate=True)
        self.name = name
        self.round = 0

    def prepare(self, args) -> str:
        self.round += 1
        dbname = f"{self.name}_{self.round}"
        with connect(self.server_uri) as conn:
            conn.execute(f'drop database if exists "{dbname}"')
            conn.execute(f'create database "{dbname}" template "{self.name}_template"')
        uri = db_uri(self.server_uri, dbname)
        with connect(uri) as conn:
            seed_jobs(conn, args.jobs, per_batch=args.per_batch, tag=f"r{self.round}")
            vacuum_analyze(conn)
        return uri

    def check(self, uri: str, args) -> int:
        with connect(uri) as conn:
            open_batches = conn.execute(
                "select count(*) as n from import_batches where status <> 'completed'"
            ).fetchone()
            assert open_batches["n"] == 0, f"{open_batches['n']} batches not completed"
            return conn.execute("select count(*) as n from ingestion_jobs where status = 'completed'").fetchone()["n"]


def pgbench_ceiling(server_uri: str, args) -> float:
    uri = create_database(server_uri, "bench_pgbench")
    with connect(uri) as conn:
        conn.execute("create table ceiling (id int primary key, n bigint not null default 0) with (fillfactor = 80)")
        conn.execute("insert into ceiling (id) select generate_series(1, 1000)")
        conn.execute("vacuum (analyze) ceiling")
    parts = __import__("psycopg").conninfo.conninfo_to_dict(uri)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="pgbench-", delete=False) as f:
        f.write("\\set id random(1, 1000)\nupdate ceiling set n = n + 1 where id = :id;\n")
        script = f.name
    try:
        result = run(
            [
                postgres_bin("pgbench"),
                "-n",
                "-M",
                "prepared",
                "-c",
                str(args.workers),
                "-j",
                str(args.workers),
                "-T",
                str(args.pgbench_seconds),
                "-f",
                script,
                "-h",
                parts["host"],
                "-U",
                parts.get("user", "postgres"),
                parts["dbname"],
            ]
        )
    finally:
        os.remove(script)
    return float(re.search(r"tps = ([\d.]+)", result.stdout).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=4000, help="no-op jobs per system per round (default 4000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes W (default 2 = nproc here)")
    parser.add_argument(
        "--claim-batch",
        type=int,
        default=10,
        help="k: jobs per claim / pgqueuer batch_size / procrastinate concurrency (default 10)",
    )
    parser.add_argument("--per-batch", type=int, default=100, help="our jobs per import batch (default 100)")
    parser.add_argument(
        "--no-heartbeat",
        dest="heartbeat",
        action="store_false",
        help="ours: skip the per-job heartbeat (claim -> complete only)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is shown (default 3)")
    parser.add_argument("--pgbench-seconds", type=int, default=8, help="pgbench duration (default 8)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"subset of {','.join(SYSTEMS)}")
    parser.add_argument("--full", action="store_true", help="full size: --jobs 20000 --rounds 3 --pgbench-seconds 20")
    parser.add_argument("--timeout", type=float, default=900, help="give up on a round after this many seconds")
    args = parser.parse_args()
    if args.full:
        args.jobs, args.rounds, args.pgbench_seconds = 20000, 3, 20
    systems = [s for s in args.systems.split(",") if s]
    logging.getLogger("procrastinate").setLevel(logging.ERROR)  # "App is instantiated in the main module"

    print(f"$ {command_line()}")
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        setups = {}
        for system in systems:
            if system == "ours":
                setups[system] = Ours(server_uri)
            elif system in ("ours_worker", "ours_worker_prepared"):
                setups[system] = Ours(server_uri, f"bench_{system}")
            elif system == "ours_sql":
                setups[system] = Ours(server_uri, "bench_ours_sql")
            elif system == "pgqueuer":
                setups[system] = PgQueuer(server_uri)
            elif system == "procrastinate":
                setups[system] = Procrastinate(server_uri)
        rates: dict[str, list[float]] = {s: [] for s in systems}
        cpu_ms: dict[str, list[float]] = {s: [] for s in systems}
        rounds_rows = []
        for number in range(1, args.rounds + 1):
            for system in systems:
                uri = setups[system].prepare(args)
                count, seconds, cpu = run_workers(system, uri, args)
                checked = setups[system].check(uri, args)
                assert count == args.jobs and checked >= args.jobs, (system, count, checked)
                rates[system].append(count / seconds)
                cpu_ms[system].append(cpu / count * 1000)
                rounds_rows.append(
                    [number, system, count, f"{seconds:.2f}", f"{count / seconds:.0f}", f"{cpu / count * 1000:.3f}"]
                )
        ceiling = pgbench_ceiling(server_uri, args)

        print_table("rounds", ["round", "system", "jobs", "seconds", "jobs/s", "client CPU ms/job"], rounds_rows)
        ours = median(rates["ours"]) if "ours" in rates else None
        rows = []
        for system in systems:
            rate = median(rates[system])
            rows.append(
                [
                    system,
                    f"{rate:.0f}",
                    f"{ours / rate:.2f}" if ours else "",
                    f"{rate / ceiling:.2f}",
                    f"{median(cpu_ms[system]):.3f}",
                ]
            )
        rows.append(
            ["pgbench 1-row update (ceiling)", f"{ceiling:.0f}", f"{ours / ceiling:.2f}" if ours else "", "1.00", ""]
        )
        print_table(
            f"no-op jobs/s, W={args.workers} processes, k={args.claim_batch}, {args.jobs} jobs/round, "
            f"median of {args.rounds} rounds",
            ["system", "jobs/s", "ours / this", "this / ceiling", "client CPU ms/job"],
            rows,
        )


if __name__ == "__main__":
    main()
