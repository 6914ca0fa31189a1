"""One large import through the real CLI: does the N-th job cost what the first one did?

A folder of N tiny documents (text and Markdown, alternating; each a few lines with its own
number, so every file's content is unique and none is a duplicate) is generated in a temp
dir. Then, against a fresh migrated database on the embedded server (DATABASE_URL):

  ingest enqueue <folder> --batch NAME      one import batch for the whole folder
  ingest work --drain --json --concurrency C   (--processes P of them at once)

Both commands are timed whole (process start-up included); nothing runs between them (no
manual vacuum or checkpoint: autovacuum does what it would for a user). Then the jobs are
put in order of enqueue (ingestion_jobs.created_at: one transaction per file) and of
completion (completed_at), cut into buckets of --bucket jobs (--full: 10000), and each bucket's time
is printed from the first bucket to the last with its time per job against the first
bucket's: a flat import keeps that ratio near 1. A bucket's time runs from the last job of
the bucket before it to its own last job (the first bucket: from its own first job, so
process start-up is not in it). Last: the batch's final status and counters, against a
count of its jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import ROOT, command_line, connect, create_database, embedded_server, machine_line, ms, print_table

WORDS = (
    "lease fence worker queue batch index chunk section page document postgres heartbeat claim commit "
    "generation search token parser markdown text lighthouse keeper river otter tea kettle harbour "
    "signal lantern archive ledger"
).split()

BATCH_NAME = "bench-large-import"


def generate_folder(folder: Path, count: int) -> int:
    """`count` tiny .txt/.md files; returns their total size in bytes."""
    total = 0
    for number in range(count):
        words = " ".join(WORDS[(number * 7 + i) % len(WORDS)] for i in range(8))
        if number % 2:
            text = f"# Note {number}\n\nThis is note {number} about {words}.\n"
            name = f"note-{number:06d}.md"
        else:
            text = f"Note {number}\n\nThis is note {number} about {words}.\n"
            name = f"note-{number:06d}.txt"
        data = text.encode("utf-8")
        (folder / name).write_bytes(data)
        total += len(data)
    return total


def ingest_command(*args: str) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "ingest"), *args]


def run_enqueue(uri: str, folder: Path, env: dict) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(
        ingest_command("enqueue", str(folder), "--batch", BATCH_NAME), env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - began
    if done.returncode:
        raise RuntimeError(f"ingest enqueue exited with {done.returncode}: {done.stderr.strip()}")
    return seconds, done.stdout.strip().splitlines()[-1]  # "batch <id> (<name>): N file(s)"


def run_drain(env: dict, concurrency: int, processes: int) -> tuple[float, dict]:
    began = time.perf_counter()
    procs = [
        subprocess.Popen(
            ingest_command("work", "--drain", "--json", "--concurrency", str(concurrency)),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode:
            raise RuntimeError(f"ingest work exited with {p.returncode}: {err.strip()}")
        reports.append(json.loads(out))
    seconds = time.perf_counter() - began
    summed = {
        k: sum(r[k] for r in reports) for k in ("claimed", "completed", "failed", "retried", "lease_lost", "abandoned")
    }
    return seconds, summed


# Jobs in order of `column`, cut into buckets of %(bucket)s; each bucket's span runs from the
# previous bucket's last job (the first bucket: its own first job) to its own last job.
BUCKETS_SQL = """
with ordered as (
    select j.id, j.{column} as t, row_number() over (order by j.{column}, j.id) - 1 as n
      from ingestion_jobs j
     where j.batch_id = %(batch_id)s and j.{column} is not null
), buckets as (
    select n / %(bucket)s as bucket, count(*) as jobs, min(t) as first_at, max(t) as last_at,
           array_agg(id) as ids
      from ordered group by 1
)
select bucket, jobs,
       extract(epoch from last_at - coalesce(lag(last_at) over (order by bucket), first_at))::float8 as seconds,
       ids
  from buckets
 order by bucket
"""

# p50 of a stage's duration (stage log) over a bucket's jobs.
STAGE_P50_SQL = """
select stage, percentile_cont(0.5) within group (order by (detail->>'seconds')::float8) as p50
  from ingestion_job_stages
 where job_id = any (%(ids)s) and stage = any (%(stages)s) and detail ? 'seconds'
 group by stage
"""

BATCH_SQL = """
select b.id, b.name, b.status, b.total_files, b.open_files, b.completed_files, b.failed_files,
       extract(epoch from b.completed_at - b.created_at)::float8 as seconds,
       (select count(*) from ingestion_jobs j where j.batch_id = b.id) as jobs,
       (select count(*) from ingestion_jobs j where j.batch_id = b.id and j.status = 'completed') as jobs_completed,
       (select count(*) from ingestion_jobs j where j.batch_id = b.id and j.status = 'failed') as jobs_failed,
       (select count(*) from ingestion_jobs j
         where j.batch_id = b.id and j.status in ('pending', 'processing')) as jobs_open
  from import_batches b
 where b.name = %(name)s
"""

STAGES = ["write", "commit"]


def bucket_rows(conn, column: str, batch_id, bucket: int, stages: bool) -> list[list]:
    rows = conn.execute(BUCKETS_SQL.format(column=column), {"batch_id": batch_id, "bucket": bucket}).fetchall()
    if not rows:
        return []
    first = rows[0]["seconds"] / max(rows[0]["jobs"] - 1, 1)  # the first bucket spans jobs - 1 intervals
    table = []
    for r in rows:
        intervals = r["jobs"] - 1 if r["bucket"] == 0 else r["jobs"]
        per_job = r["seconds"] / max(intervals, 1)
        start = r["bucket"] * bucket
        row = [
            f"{start + 1}-{start + r['jobs']}",
            r["jobs"],
            f"{r['seconds']:.2f}",
            f"{1 / per_job:.0f}" if per_job > 0 else "-",
            f"{per_job / first:.2f}" if first > 0 else "-",
        ]
        if stages:
            p50 = {s["stage"]: s["p50"] for s in conn.execute(STAGE_P50_SQL, {"ids": r["ids"], "stages": STAGES})}
            row += [ms(p50[s]) if s in p50 else "-" for s in STAGES]
        table.append(row)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=3000, help="tiny documents in the folder (default 3000)")
    parser.add_argument("--bucket", type=int, help="jobs per bucket (default: docs / 10; --full: 10000)")
    parser.add_argument("--concurrency", type=int, default=4, help="jobs in flight per `ingest work` (default 4)")
    parser.add_argument("--processes", type=int, default=1, help="`ingest work --drain` processes (default 1)")
    parser.add_argument("--full", action="store_true", help="--docs 100000 --bucket 10000")
    parser.add_argument("--keep-folder", action="store_true", help="do not delete the generated folder")
    args = parser.parse_args()
    if args.full:
        args.docs, args.bucket = 100000, args.bucket or 10000
    bucket = args.bucket or max(1, args.docs // 10)

    print(f"$ {command_line()}")
    folder = Path(tempfile.mkdtemp(prefix="ingest-bench-import-"))
    try:
        began = time.perf_counter()
        size = generate_folder(folder, args.docs)
        print(
            f"folder: {args.docs} tiny .txt/.md files, {size} bytes ({size / args.docs:.0f} B mean), "
            f"generated in {time.perf_counter() - began:.1f}s"
        )
        with embedded_server() as server_uri:
            print(machine_line(server_uri))
            uri = create_database(server_uri, "bench_large_import", migrate=True)
            env = {**os.environ, "DATABASE_URL": uri, "INGEST_POOL_MAX_SIZE": str(2 * args.concurrency + 2)}

            enqueue_seconds, enqueue_line = run_enqueue(uri, folder, env)
            print(f"ingest enqueue: {enqueue_line} in {enqueue_seconds:.1f}s", flush=True)
            drain_seconds, report = run_drain(env, args.concurrency, args.processes)
            print(f"ingest work --drain: {report['completed']} completed in {drain_seconds:.1f}s", flush=True)

            with connect(uri) as conn:
                batch = conn.execute(BATCH_SQL, {"name": BATCH_NAME}).fetchone()
                enqueued = bucket_rows(conn, "created_at", batch["id"], bucket, stages=False)
                completed = bucket_rows(conn, "completed_at", batch["id"], bucket, stages=True)

        print_table(
            f"import of {args.docs} tiny documents through the CLI (wall time, process start-up included)",
            [
                "phase",
                "command",
                "docs",
                "seconds",
                "docs/s",
                "completed",
                "failed",
                "retried",
                "lease_lost",
                "abandoned",
            ],
            [
                [
                    "enqueue",
                    f"ingest enqueue <folder> --batch {BATCH_NAME}",
                    args.docs,
                    f"{enqueue_seconds:.1f}",
                    f"{args.docs / enqueue_seconds:.1f}",
                    "",
                    "",
                    "",
                    "",
                    "",
                ],
                [
                    "drain",
                    f"{args.processes} x ingest work --drain --concurrency {args.concurrency}",
                    report["claimed"],
                    f"{drain_seconds:.1f}",
                    f"{report['completed'] / drain_seconds:.1f}",
                    report["completed"],
                    report["failed"],
                    report["retried"],
                    report["lease_lost"],
                    report["abandoned"],
                ],
            ],
        )
        headers = ["jobs (in order)", "count", "seconds", "jobs/s", "s per job / first"]
        print_table(f"enqueue, per {bucket} jobs in order of enqueue (ingestion_jobs.created_at)", headers, enqueued)
        print_table(
            f"drain, per {bucket} jobs in order of completion (ingestion_jobs.completed_at)",
            [*headers, *[f"{s} p50 ms" for s in STAGES]],
            completed,
        )
        print_table(
            "last bucket / first bucket, time per job (flat = 1.00)",
            ["phase", "last / first"],
            [["enqueue", enqueued[-1][4] if enqueued else "-"], ["drain", completed[-1][4] if completed else "-"]],
        )
        print_table(
            f"batch {batch['id']} ({batch['name']}) at the end: counters against a count of its jobs",
            [
                "status",
                "total",
                "open",
                "completed",
                "failed",
                "jobs counted",
                "open counted",
                "completed counted",
                "failed counted",
                "created -> completed s",
            ],
            [
                [
                    batch["status"],
                    batch["total_files"],
                    batch["open_files"],
                    batch["completed_files"],
                    batch["failed_files"],
                    batch["jobs"],
                    batch["jobs_open"],
                    batch["jobs_completed"],
                    batch["jobs_failed"],
                    f"{batch['seconds']:.1f}" if batch["seconds"] is not None else "-",
                ]
            ],
        )
        exact = (batch["total_files"], batch["open_files"], batch["completed_files"], batch["failed_files"]) == (
            batch["jobs"],
            batch["jobs_open"],
            batch["jobs_completed"],
            batch["jobs_failed"],
        )
        print(
            f"\ncounters {'exact' if exact else 'WRONG'}; batch {batch['status']}; "
            f"{batch['jobs_completed']}/{args.docs} jobs completed"
        )
    finally:
        if args.keep_folder:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
