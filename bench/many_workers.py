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
import contextlib
import multiprocessing as mp
import os
import queue
import threading
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

TEMPLATE = "bench_many_template"
SETUP_TIMEOUT = 300  # seconds for every child to import, connect and reach the barrier


# -- in each child: timing the claim and the acknowledgements --------------------------


class QueueProbe:
    """Wraps a worker's IngestionRpc (instance attributes shadow the methods, so the
    Worker, its AckBuffer and its LeaseKeeper all go through the wrappers): every claim's
    duration and the pool checkout inside it, the first claim's start and the last
    acknowledgement that completed a job (monotonic: one clock for every process here)."""

    def __init__(self, rpc) -> None:
        self.claims: list[float] = []
        self.checkouts: list[float] = []
        self.first_claim: float | None = None
        self.last_ack: float | None = None
        self._in_claim = threading.local()
        claim, complete_many, connection = rpc.claim, rpc.complete_many, rpc._connection

        def timed_claim(*args, **kwargs):
            began = time.perf_counter()
            if self.first_claim is None:
                self.first_claim = time.monotonic()
            self._in_claim.on = True
            try:
                return claim(*args, **kwargs)
            finally:
                self._in_claim.on = False
                self.claims.append(time.perf_counter() - began)

        def timed_complete_many(*args, **kwargs):
            done = complete_many(*args, **kwargs)
            if any(d.ok for d in done):
                self.last_ack = time.monotonic()
            return done

        @contextmanager
        def timed_connection():
            began = time.perf_counter()
            with connection() as conn:
                if getattr(self._in_claim, "on", False):
                    self.checkouts.append(time.perf_counter() - began)
                yield conn

        rpc.claim, rpc.complete_many, rpc._connection = timed_claim, timed_complete_many, timed_connection

    def result(self, counts: dict) -> dict:
        return {
            "counts": counts,
            "first_claim": self.first_claim,
            "last_ack": self.last_ack,
            "claims": self.claims,
            "checkouts": self.checkouts,
        }


def worker_child(uri: str, opts: dict, barrier, out) -> None:
    """One `ingest work --drain` equivalent: the real Worker, no-op processor."""
    result: dict = {"pid": os.getpid()}
    try:
        from ingestion_pipeline.db.connection import make_pool
        from ingestion_pipeline.db.rpc import IngestionRpc
        from ingestion_pipeline.settings import load_settings
        from ingestion_pipeline.worker import Worker
        from ingestion_pipeline.worker.indexing import no_op

        settings = load_settings(
            database_url=uri,
            worker_concurrency=opts["concurrency"],
            claim_batch_size=opts["claim_batch"],
            pool_min_size=1,
            pool_max_size=opts["pool_size"],
        )
        pool = make_pool(uri, settings, application_name="bench-many-workers")
        try:
            rpc = IngestionRpc(pool, stale_after_seconds=settings.stale_after_seconds)
            probe = QueueProbe(rpc)
            worker = Worker(pool, settings, label="bench-many", processor=no_op, rpc=rpc)
            barrier.wait(SETUP_TIMEOUT)
            report = worker.run(drain=True)
        finally:
            pool.close()
        result.update(probe.result(report.counts))
    except BaseException as exc:  # noqa: BLE001 - reported, never a silent hang of the parent
        barrier.abort()
        result["error"] = f"{type(exc).__name__}: {exc}"
    out.put(result)


def dagster_child(uri: str, opts: dict, barrier, out) -> None:
    """One Dagster drain run of ingest_documents, in process (ephemeral instance), with the
    asset's Worker given the no-op processor and the claim probe."""
    result: dict = {"pid": os.getpid()}
    try:
        import logging
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ingestion_pipeline.definitions import make_definitions
            from ingestion_pipeline.orchestration import assets
            from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
            from ingestion_pipeline.worker.indexing import no_op

            logging.getLogger("dagster").setLevel(logging.WARNING)
            probes: list[QueueProbe] = []

            class BenchWorker(assets.Worker):
                def __init__(self, pool, settings, **kwargs):
                    super().__init__(pool, settings, **{**kwargs, "processor": no_op})
                    probes.append(QueueProbe(self.rpc))

            assets.Worker = BenchWorker  # this child only: the asset builds BenchWorker
            job = make_definitions(
                DatabaseResource(database_url=uri, pool_max_size=opts["pool_size"]), ProcessingResource()
            ).resolve_job_def("ingest_documents")
        run_config = {
            "ops": {"document_index": {"config": {"max_jobs": opts["jobs"], "concurrency": opts["concurrency"]}}},
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        }
        barrier.wait(SETUP_TIMEOUT)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ran = job.execute_in_process(run_config=run_config, raise_on_error=False)
        result["returned"] = time.monotonic()
        if not ran.success:
            raise RuntimeError(f"ingest_documents run {ran.run_id[:8]} failed")
        [materialization] = ran.asset_materializations_for_node("document_index")
        meta = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
        [probe] = probes
        result.update(
            probe.result(
                {
                    "completed": meta["documents_indexed"],
                    "failed": meta["documents_failed"],
                    "retried": meta["retried"],
                    "lease_lost": meta["lease_lost"],
                    "abandoned": meta["abandoned"],
                }
            )
        )
    except BaseException as exc:  # noqa: BLE001 - reported, as in the worker child above
        barrier.abort()
        result["error"] = f"{type(exc).__name__}: {exc}"
    out.put(result)


def run_children(target, uri: str, opts: dict, processes: int, timeout: float) -> tuple[list[dict], float]:
    """Spawn `processes` children of target; all start their loop at one barrier. Returns
    their results and the monotonic time the parent passed the barrier."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes + 1), ctx.Queue()
    procs = [ctx.Process(target=target, args=(uri, opts, barrier, out), daemon=True) for _ in range(processes)]
    for p in procs:
        p.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a child failed during set-up: its result says why
        barrier.wait(SETUP_TIMEOUT)
    released = time.monotonic()
    results: list[dict] = []
    deadline = released + timeout
    while len(results) < processes:
        try:
            results.append(out.get(timeout=1))
        except queue.Empty:
            if time.monotonic() > deadline or not any(p.is_alive() for p in procs):
                for p in procs:
                    if p.is_alive():
                        p.terminate()
                raise RuntimeError(
                    f"{len(results)} of {processes} children reported "
                    f"({'timeout' if time.monotonic() > deadline else 'the others died'})"
                ) from None
    for p in procs:
        p.join()
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise RuntimeError(f"{len(errors)} of {processes} children failed; first: {errors[0]}")
    return results, released


# -- in the parent: the lock-wait and connection sampler -------------------------------

SAMPLE_SQL = r"""
with a as (
    select pid, backend_type, wait_event_type, wait_event, query_start,
           coalesce(substring(query from '([a-z_]+_ingestion_[a-z_]+)\s*\('), 'other') as rpc
      from pg_stat_activity
     where datname = %(db)s
)
select (select count(*) from a where backend_type = 'client backend')::int as clients,
       (select coalesce(json_agg(json_build_object('pid', pid, 'event', wait_event, 'since', query_start,
                                                   'rpc', rpc)), '[]')
          from a where wait_event_type = 'Lock') as waiting,
       (select count(*) from pg_locks l join a using (pid) where not l.granted)::int as ungranted
"""


class Sampler(threading.Thread):
    """Samples the scratch database's sessions every `interval` seconds until stopped."""

    def __init__(self, server_uri: str, dbname: str, interval: float):
        super().__init__(daemon=True)
        self.server_uri, self.dbname, self.interval = server_uri, dbname, interval
        self.samples = 0
        self.with_waiters = 0
        self.waiting_backend_samples = 0
        self.waits: set[tuple] = set()
        self.events: Counter = Counter()  # (waiting RPC, wait_event) of each distinct wait seen
        self.peak_waiting = 0
        self.peak_ungranted = 0
        self.peak_clients = 0
        self.error: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            with connect(self.server_uri, application_name="bench-many-sampler") as conn:
                next_at = time.monotonic()
                while not self._stop_event.is_set():
                    row = conn.execute(SAMPLE_SQL, {"db": self.dbname}).fetchone()
                    self._add(row)
                    next_at += self.interval
                    self._stop_event.wait(max(0.0, next_at - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - reported with the row; the run itself goes on
            self.error = f"{type(exc).__name__}: {exc}"

    def _add(self, row: dict) -> None:
        self.samples += 1
        waiting = row["waiting"]
        self.peak_clients = max(self.peak_clients, row["clients"])
        self.peak_ungranted = max(self.peak_ungranted, row["ungranted"])
        self.peak_waiting = max(self.peak_waiting, len(waiting))
        if waiting:
            self.with_waiters += 1
            self.waiting_backend_samples += len(waiting)
        for w in waiting:
            key = (w["pid"], w["since"])
            if key not in self.waits:
                self.waits.add(key)
                self.events[(w["rpc"], w["event"])] += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


# -- the connection budget ---------------------------------------------------------------

BUDGET_SQL = """
select current_setting('max_connections')::int as max_connections,
       current_setting('superuser_reserved_connections')::int as superuser_reserved,
       coalesce(current_setting('reserved_connections', true), '0')::int as reserved,
       (select count(*) from pg_stat_activity
         where backend_type = 'client backend' and pid <> pg_backend_pid())::int as in_use
"""


def connection_budget(server_uri: str) -> dict:
    with connect(server_uri) as conn:
        row = conn.execute(BUDGET_SQL).fetchone()
    row["available"] = row["max_connections"] - row["superuser_reserved"] - row["reserved"] - row["in_use"]
    return row


def needed(processes: int, pool_size: int) -> int:
    return processes * pool_size + 1  # + the sampler


def budget_line(budget: dict, counts: list[int], dagster_runs: int, pool_size: int) -> str:
    cells = [f"{n}->{needed(n, pool_size)}" for n in counts]
    if dagster_runs:
        cells.append(f"dagster {dagster_runs}->{needed(dagster_runs, pool_size)}")
    return (
        f"connection budget: max_connections {budget['max_connections']} - reserved "
        f"{budget['superuser_reserved'] + budget['reserved']} (superuser_reserved_connections "
        f"{budget['superuser_reserved']}, reserved_connections {budget['reserved']}) - "
        f"{budget['in_use']} client backend(s) already connected = {budget['available']} available; "
        f"a count needs processes x pool {pool_size} + 1 sampler: {', '.join(cells)}"
    )


def refusal(label: str, processes: int, pool_size: int, budget: dict) -> str | None:
    need = needed(processes, pool_size)
    if need <= budget["available"]:
        return None
    return (
        f"{label}: refused: needs {need} connections ({processes} x pool {pool_size} + 1 sampler), "
        f"the server has {budget['available']} available; lower --pool-size or the count"
    )


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
