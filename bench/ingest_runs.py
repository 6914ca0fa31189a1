"""One run of ingest_corpus.py (and of the benches that reuse it): the generated corpus, a
drain by the worker in process or by `ingest work --drain` subprocesses, the Run it
measured (stage times from the stage log) and its tables."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from common import ROOT, connect, print_table

WORDS = (
    "lease fence worker queue batch index chunk section page document postgres heartbeat claim commit "
    "generation search vector token parser markdown html text lighthouse keeper river otter tea kettle "
    "harbour signal lantern archive ledger migration schema janitor sensor drain backoff retry jitter "
    "snapshot isolation deadlock transaction durable replica"
).split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(3, 8)))


def make_document(kind: str, number: int, target_bytes: int, rng: random.Random) -> str:
    title = f"Document {number}: {rng.choice(WORDS)} and {rng.choice(WORDS)}"
    parts: list[str] = []
    size = 0
    section = 0
    while size < target_bytes:
        section += 1
        heading = f"Section {section} on {rng.choice(WORDS)}"
        body = [paragraph(rng) for _ in range(rng.randint(2, 5))]
        if kind == "md":
            block = f"## {heading}\n\n" + "\n\n".join(body) + "\n"
        elif kind == "html":
            block = f"<h2>{heading}</h2>\n" + "\n".join(f"<p>{p}</p>" for p in body) + "\n"
        else:
            block = f"{heading}\n\n" + "\n\n".join(body) + "\n"
        parts.append(block)
        size += len(block)
    body = "\n".join(parts)
    if kind == "md":
        return f"# {title}\n\n{body}"
    if kind == "html":
        return (
            f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body><h1>{title}</h1>\n{body}</body></html>\n"
        )
    return f"{title}\n\n{body}"


def generate_corpus(folder: Path, count: int, mean_kb: float, seed: int) -> None:
    rng = random.Random(seed)
    kinds = ["txt", "md", "html"]
    for number in range(count):
        kind = kinds[number % 3]
        target = int(rng.expovariate(1 / (mean_kb * 1024))) + 512
        (folder / f"doc-{number:05d}.{kind}").write_text(make_document(kind, number, target, rng), "utf-8")


STAGES_SQL = """
select stage, count(*) as n,
       sum((detail->>'seconds')::float8) as total,
       percentile_cont(0.5) within group (order by (detail->>'seconds')::float8) as p50,
       percentile_cont(0.99) within group (order by (detail->>'seconds')::float8) as p99
  from ingestion_job_stages
 where detail ? 'seconds'
 group by stage
 order by min(id)
"""


def run_in_process(uri: str, concurrency: int, parse_processes: int | None = None) -> dict:
    from ingestion_pipeline.db.connection import make_pool
    from ingestion_pipeline.settings import Settings
    from ingestion_pipeline.worker import Worker

    settings = Settings(database_url=uri, worker_concurrency=concurrency, pool_max_size=2 * concurrency + 2)
    with make_pool(uri, settings) as pool:
        report = Worker(pool, settings, label="bench", parse_processes=parse_processes).run(drain=True)
    return report.as_dict()


def run_cli(
    uri: str, concurrency: int | None, processes: int, parse_processes: int | None = None, extra_env: dict | None = None
) -> dict:
    """`processes` × `ingest work --drain`; concurrency None: the settings' default."""
    env = {**os.environ, "DATABASE_URL": uri, **(extra_env or {})}
    if concurrency is not None:
        env.update(INGEST_WORKER_CONCURRENCY=str(concurrency), INGEST_POOL_MAX_SIZE=str(2 * concurrency + 2))
    if parse_processes is not None:
        env["INGEST_PARSE_PROCESSES"] = str(parse_processes)
    ingest = str(ROOT / ".venv" / "bin" / "ingest")
    procs = [
        subprocess.Popen([ingest, "work", "--drain", "--json"], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    reports = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"ingest work exited with {p.returncode}")
        reports.append(json.loads(out))
    summed = {
        k: sum(r[k] for r in reports) for k in ("claimed", "completed", "failed", "retried", "lease_lost", "abandoned")
    }
    return summed


@dataclass
class Run:
    """One enqueue + drain of the corpus into one database."""

    schema: str  # newest applied migration version
    files: int
    mb: float
    chunks: int
    enqueue_seconds: float
    seconds: float  # the drain
    report: dict
    stages: list[dict]

    @property
    def docs_per_s(self) -> float:
        return self.report["completed"] / self.seconds

    def stage(self, name: str, column: str = "total") -> float:
        return next((s[column] for s in self.stages if s["stage"] == name), float("nan"))


def ingest(uri: str, folder: Path, args: argparse.Namespace) -> Run:
    from ingestion_pipeline.db.connection import make_pool
    from ingestion_pipeline.operations.enqueue import enqueue_paths
    from ingestion_pipeline.settings import Settings

    settings = Settings(database_url=uri)
    started = time.perf_counter()
    with make_pool(uri, settings) as pool:
        enqueued = enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes, batch_name="bench")
    enqueue_seconds = time.perf_counter() - started
    started = time.perf_counter()
    report = (
        run_in_process(uri, args.concurrency, args.parse_processes)
        if args.via == "worker"
        else run_cli(uri, args.concurrency, args.processes, args.parse_processes, getattr(args, "env", None))
    )
    seconds = time.perf_counter() - started

    with connect(uri) as conn:
        totals = conn.execute(
            "select coalesce(sum(byte_size), 0) as bytes, coalesce(sum(chunk_count), 0)"
            " as chunks, count(*) filter (where status = 'indexed') as indexed"
            " from documents"
        ).fetchone()
        stages = conn.execute(STAGES_SQL).fetchall()
        schema = conn.execute("select max(version) as v from ingest_schema_migrations").fetchone()["v"]
    return Run(
        schema,
        len(enqueued.files),
        float(totals["bytes"]) / 1e6,
        totals["chunks"],
        enqueue_seconds,
        seconds,
        report,
        stages,
    )


def print_run(run: Run, args: argparse.Namespace) -> None:
    print_table(
        f"end to end ({args.via}, concurrency {args.concurrency}"
        + (f", {args.processes} processes" if args.via == "cli" else "")
        + ")",
        ["phase", "docs", "seconds", "docs/s", "MB/s", "chunks", "completed", "failed", "retried"],
        [
            [
                "enqueue",
                run.files,
                f"{run.enqueue_seconds:.2f}",
                f"{run.files / run.enqueue_seconds:.1f}",
                f"{run.mb / run.enqueue_seconds:.2f}",
                "",
                "",
                "",
                "",
            ],
            [
                "work (drain)",
                run.report["claimed"],
                f"{run.seconds:.2f}",
                f"{run.docs_per_s:.1f}",
                f"{run.mb / run.seconds:.2f}",
                run.chunks,
                run.report["completed"],
                run.report["failed"],
                run.report["retried"],
            ],
        ],
    )
    stage_total = sum(s["total"] for s in run.stages) or 1
    print_table(
        "stages (from ingestion_job_stages, seconds per job)",
        ["stage", "jobs", "total s", "share", "p50 ms", "p99 ms"],
        [
            [
                s["stage"],
                s["n"],
                f"{s['total']:.2f}",
                f"{s['total'] / stage_total:.0%}",
                f"{s['p50'] * 1000:.2f}",
                f"{s['p99'] * 1000:.2f}",
            ]
            for s in run.stages
        ],
    )
    print(
        f"\nsum of stage times {stage_total:.2f}s over {run.seconds:.2f}s wall with concurrency "
        f"{args.concurrency}; the rest of a job (claim, lease RPCs, stage-log RPCs, complete) is not a stage"
    )


# (label in the tables, Run -> value, format); seconds and ms are per drain, summed over its jobs
COMPARED = [
    ("drain s", lambda r: r.seconds, "{:.2f}"),
    ("docs/s", lambda r: r.docs_per_s, "{:.1f}"),
    ("MB/s", lambda r: r.mb / r.seconds, "{:.2f}"),
    ("write s", lambda r: r.stage("write"), "{:.2f}"),
    ("write p50 ms", lambda r: r.stage("write", "p50") * 1000, "{:.2f}"),
    ("commit s", lambda r: r.stage("commit"), "{:.2f}"),
    ("commit p50 ms", lambda r: r.stage("commit", "p50") * 1000, "{:.2f}"),
]


def cell(fmt: str, value: float) -> str:
    return "-" if math.isnan(value) else fmt.format(value)  # "-": no such stage row in that schema's log
