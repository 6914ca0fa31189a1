"""End-to-end ingestion: docs/s and MB/s for a folder of documents, enqueued with
enqueue_paths and drained by the worker, with a per-stage breakdown from the stage log
(`ingestion_job_stages.detail->>'seconds'`).

By default a corpus of text, Markdown and HTML files is generated into a temp folder
(deterministic: --seed); pass --folder to ingest your own files instead. The worker runs
in this process (`Worker(pool, settings).run(drain=True)`), or, with --via cli, as
--processes `ingest work --drain --json` subprocesses against the same database.

With --compare-target VERSION the same corpus is ingested end to end, --rounds times,
into two fresh databases on the same server: one migrated to head and one migrated only
up to VERSION (inclusive). Rounds alternate (head, VERSION, head, VERSION, ...), each
database is created for its run and dropped after it, and a checkpoint precedes every
run. Printed: every run, then the median per schema and the ratio head / VERSION.

With --embedder openai the same corpus is drained by `ingest work --drain` (every default:
parsing in children) without an embedder, with the hash embedder (64 numbers, in the
children), and with INGEST_EMBEDDER=openai against the local OpenAI-compatible server of
the project's test tooling (ingest_testing/openai_server.py, installed by the [test] extra: a thread of
this process, answering with hashed vectors): with hash's 64 numbers (the same vectors,
over HTTP), with --embed-dimensions (a real model's size), and with that size and
--embed-latency-ms per request (a model's own time); --rounds rounds interleaved, a fresh
database each; medians, and the ratio to no embedder.

With --corpus mixed: --copies copies of twelve Office and other documents and
--scan-copies copies of four scans (PNG, JPEG, TIFF, image-only PDF), built by the bench
with pandoc, LibreOffice and Pillow, drained by `ingest work --drain` in two batches
(documents, then scans), then each format alone; docs, pages, wall seconds, docs/s, and
the CPU of the worker's whole process tree, per OCR'd page for the scans
(bench/mixed_corpus.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import (
    ROOT,
    command_line,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    median,
    print_table,
)
from mixed_corpus import run_mixed

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


def compare(server_uri: str, folder: Path, args: argparse.Namespace) -> None:
    """Head against --compare-target, rounds interleaved, a fresh database per run."""
    runs: dict[str | None, list[Run]] = {None: [], args.compare_target: []}
    for number in range(1, args.rounds + 1):
        for target in runs:
            name = f"bench_ingest_{target or 'head'}"
            uri = create_database(server_uri, name, migrate=True, target=target)
            with connect(uri) as conn:
                conn.execute("checkpoint")  # no run pays for the previous run's dirty buffers
            run = ingest(uri, folder, args)
            drop_database(server_uri, name)
            runs[target].append(run)
            print(
                f"round {number} schema {run.schema}: {run.report['completed']}/{run.files} docs in "
                f"{run.seconds:.2f}s, {run.docs_per_s:.1f} docs/s, write {run.stage('write'):.2f}s",
                flush=True,
            )
    head = runs[None]
    label = {None: f"head {head[0].schema}", args.compare_target: f"target {args.compare_target}"}
    print_table(
        "runs",
        ["round", "schema", "docs", "failed", "retried", *(c[0] for c in COMPARED)],
        [
            [
                n + 1,
                label[t],
                r.report["completed"],
                r.report["failed"],
                r.report["retried"],
                *(cell(fmt, f(r)) for _, f, fmt in COMPARED),
            ]
            for n in range(args.rounds)
            for t, r in ((t, runs[t][n]) for t in runs)
        ],
    )
    medians = {t: [median([f(r) for r in rs]) for _, f, _ in COMPARED] for t, rs in runs.items()}
    rows = [[label[t], *(cell(fmt, v) for (_, _, fmt), v in zip(COMPARED, medians[t], strict=True))] for t in runs]
    rows.append(
        [
            "head / target",
            *(cell("{:.2f}", h / o) for h, o in zip(medians[None], medians[args.compare_target], strict=True)),
        ]
    )
    print_table(
        f"end to end ({args.via}, concurrency {args.concurrency}), {head[0].files} files, "
        f"{head[0].mb:.2f} MB, median of {args.rounds} rounds per schema",
        ["schema", *(c[0] for c in COMPARED)],
        rows,
    )
    print(
        f"\nratio of median drain docs/s, head / {args.compare_target}: "
        f"{medians[None][1] / medians[args.compare_target][1]:.3f}"
    )


# (label, `ingest work` processes, INGEST_PARSE_PROCESSES, INGEST_WORKER_CONCURRENCY): parsing
# in the worker's threads with the jobs in flight of that design (4), then in its children
# with every default (children = cores, 4 + 4 jobs in flight per child).
PARSING = [
    ("1 process, parsing in its threads", 1, 0, 4),
    ("2 processes, parsing in their threads", 2, 0, 4),
    ("1 process, parsing in its children (defaults)", 1, None, None),
]


def compare_parsing(server_uri: str, folder: Path, args: argparse.Namespace) -> None:
    """`ingest work --drain` with parsing in its threads (1 and 2 processes) and in its
    children, a fresh database each, --rounds rounds interleaved; medians."""
    runs: dict[str, list[Run]] = {label: [] for label, _, _, _ in PARSING}
    for number in range(1, args.rounds + 1):
        for label, processes, parse_processes, concurrency in PARSING:
            uri = create_database(server_uri, "bench_ingest_parsing", migrate=True)
            with connect(uri) as conn:
                conn.execute("checkpoint")
            run = ingest(
                uri,
                folder,
                argparse.Namespace(
                    **{
                        **vars(args),
                        "via": "cli",
                        "processes": processes,
                        "parse_processes": parse_processes,
                        "concurrency": concurrency,
                    }
                ),
            )
            drop_database(server_uri, "bench_ingest_parsing")
            runs[label].append(run)
            print(
                f"round {number}, {label}: {run.report['completed']}/{run.files} docs in {run.seconds:.2f}s, "
                f"{run.docs_per_s:.1f} docs/s",
                flush=True,
            )
    first = runs[PARSING[0][0]][0]
    base = median([r.docs_per_s for r in runs[PARSING[0][0]]])
    print_table(
        f"`ingest work --drain`, {first.files} files, {first.mb:.2f} MB, median of {args.rounds} round(s)",
        ["configuration", "drain s", "docs/s", "MB/s", "failed", "vs 1 process in threads"],
        [
            [
                label,
                f"{median([r.seconds for r in rs]):.2f}",
                f"{median([r.docs_per_s for r in rs]):.1f}",
                f"{median([r.mb / r.seconds for r in rs]):.2f}",
                sum(r.report["failed"] for r in rs),
                f"{median([r.docs_per_s for r in rs]) / base:.2f}",
            ]
            for label, rs in runs.items()
        ],
    )


def embedder_configurations(server_url: str, key: str, model: str, args: argparse.Namespace) -> list[tuple]:
    """(label, environment of `ingest work`, the local server's added latency per request)."""

    def openai(dimensions: int) -> dict:
        return {
            "INGEST_EMBEDDER": "openai",
            "INGEST_OPENAI_BASE_URL": server_url,
            "INGEST_OPENAI_MODEL": model,
            "INGEST_OPENAI_API_KEY": key,
            "INGEST_OPENAI_DIMENSIONS": str(dimensions),
            "INGEST_OPENAI_ENCODING_FORMAT": args.embed_encoding,
        }

    size, latency = args.embed_dimensions, args.embed_latency_ms
    return [
        ("no embedder", {"INGEST_EMBEDDER": "none"}, 0.0),
        ("hash (64), in the parsing children", {"INGEST_EMBEDDER": "hash"}, 0.0),
        ("openai (64), local server", openai(64), 0.0),
        (f"openai ({size}), local server", openai(size), 0.0),
        (f"openai ({size}), local server +{latency:g} ms/request", openai(size), latency / 1000),
    ]


@dataclass
class EmbedRun:
    run: Run
    requests: int  # answered by the local server during the drain, faults included
    server_cpu: float  # this process's CPU during the drain: the local server answering


def compare_embedders(server_uri: str, folder: Path, args: argparse.Namespace) -> None:
    """`ingest work --drain` (defaults) without an embedder, with hash, and with openai on the
    local server; a fresh database each, --rounds rounds interleaved; medians."""
    from ingest_testing.openai_server import OpenAIServer

    with OpenAIServer(api_key="bench-key") as server:
        configurations = embedder_configurations(server.url, server.api_key, server.model, args)
        runs: dict[str, list[EmbedRun]] = {label: [] for label, _, _ in configurations}
        for number in range(1, args.rounds + 1):
            for label, env, latency in configurations:
                server.latency_seconds = latency
                uri = create_database(server_uri, "bench_ingest_embedders", migrate=True)
                with connect(uri) as conn:
                    conn.execute("checkpoint")
                requests, cpu = server.requests, time.process_time()
                run = ingest(
                    uri,
                    folder,
                    argparse.Namespace(
                        **{
                            **vars(args),
                            "via": "cli",
                            "processes": 1,
                            "parse_processes": None,
                            "concurrency": None,
                            "env": env,
                        }
                    ),
                )
                drop_database(server_uri, "bench_ingest_embedders")
                runs[label].append(EmbedRun(run, server.requests - requests, time.process_time() - cpu))
                print(
                    f"round {number}, {label}: {run.report['completed']}/{run.files} docs in {run.seconds:.2f}s, "
                    f"{run.docs_per_s:.1f} docs/s, {server.requests - requests} requests",
                    flush=True,
                )
    print_embedders(runs, args)


def print_embedders(runs: dict[str, list[EmbedRun]], args: argparse.Namespace) -> None:
    first = next(iter(runs.values()))
    base = median([e.run.docs_per_s for e in first])

    def row(label: str, done: list[EmbedRun]) -> list:
        docs_per_s = median([e.run.docs_per_s for e in done])
        return [
            label,
            f"{median([e.run.seconds for e in done]):.2f}",
            f"{docs_per_s:.1f}",
            f"{median([e.run.mb / e.run.seconds for e in done]):.2f}",
            sum(e.run.report["failed"] for e in done),
            median([e.requests for e in done]),
            cell("{:.2f}", median([e.run.stage("embed", "p50") * 1000 for e in done])),
            f"{median([e.server_cpu for e in done]):.2f}",
            f"{docs_per_s / base:.2f}",
        ]

    print_table(
        f"`ingest work --drain` (defaults), {first[0].run.files} files, {first[0].run.mb:.2f} MB, "
        f"{first[0].run.chunks} chunks, median of {args.rounds} round(s)",
        [
            "configuration",
            "drain s",
            "docs/s",
            "MB/s",
            "failed",
            "requests",
            "embed p50 ms",
            "server CPU s",
            "vs no embedder",
        ],
        [row(label, done) for label, done in runs.items()],
    )
    print(
        "\ndrain s: from the start of `ingest work` to its exit (start-up included). embed p50: the embed "
        "stage of a job (openai: in the job's thread, requests of INGEST_OPENAI_BATCH_SIZE=32 chunks; hash: in "
        "the parsing children). server CPU: this process's CPU during the drain, i.e. the local server. "
        f"openai vectors as {args.embed_encoding}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus",
        choices=["generated", "mixed"],
        default="generated",
        help="generated: txt/md/html (default); mixed: Office documents and scans made by pandoc, "
        "LibreOffice and Pillow, drained in two batches, then per format (see bench/mixed_corpus.py)",
    )
    parser.add_argument(
        "--copies", type=int, default=10, help="with --corpus mixed: copies of the 12 documents (default 10)"
    )
    parser.add_argument(
        "--scan-copies",
        type=int,
        default=5,
        help="with --corpus mixed: copies of the 4 scans, 6 pages each (default 5)",
    )
    parser.add_argument("--folder", type=Path, help="ingest this folder instead of a generated corpus")
    parser.add_argument("--docs", type=int, default=300, help="generated documents (default 300)")
    parser.add_argument("--mean-kb", type=float, default=16, help="mean generated document size in KiB (default 16)")
    parser.add_argument("--seed", type=int, default=7, help="corpus random seed (default 7)")
    parser.add_argument("--concurrency", type=int, default=4, help="jobs in flight per worker (default 4)")
    parser.add_argument(
        "--via",
        choices=["worker", "cli"],
        default="worker",
        help="Worker.run(drain=True) in process (default) or `ingest work --drain` subprocesses",
    )
    parser.add_argument("--processes", type=int, default=1, help="with --via cli: worker processes (default 1)")
    parser.add_argument(
        "--parse-processes",
        type=int,
        default=None,
        help="parsing children per worker (INGEST_PARSE_PROCESSES; 0: in the worker's threads; default: one per core)",
    )
    parser.add_argument(
        "--compare-parsing",
        action="store_true",
        help="`ingest work --drain`: 1 process parsing in its threads, 2 such processes, and 1 "
        "process parsing in its children; --rounds rounds each",
    )
    parser.add_argument(
        "--embedder",
        choices=["openai"],
        help="openai: `ingest work --drain` without an embedder, with hash, and with "
        "INGEST_EMBEDDER=openai against a local OpenAI-compatible server; --rounds rounds each",
    )
    parser.add_argument(
        "--embed-dimensions",
        type=int,
        default=768,
        metavar="N",
        help="with --embedder: the vector size of the openai runs after the 64-number one (default 768)",
    )
    parser.add_argument(
        "--embed-latency-ms",
        type=float,
        default=25,
        metavar="MS",
        help="with --embedder: the local server's wait per request in the last run (default 25)",
    )
    parser.add_argument(
        "--embed-encoding",
        choices=["base64", "float"],
        default="base64",
        help="with --embedder: INGEST_OPENAI_ENCODING_FORMAT of the openai runs (default base64)",
    )
    parser.add_argument("--full", action="store_true", help="--docs 2000 --mean-kb 32")
    parser.add_argument(
        "--compare-target",
        metavar="VERSION",
        help="also run against a database migrated only up to this 14-digit migration version "
        "and print head / VERSION (e.g. 20261130000700)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="with --compare-target, --compare-parsing or --embedder: runs per configuration (default 3)",
    )
    args = parser.parse_args()
    if args.full:
        args.docs, args.mean_kb = 2000, 32

    print(f"$ {command_line()}")
    if args.corpus == "mixed":
        if args.folder or args.compare_target or args.compare_parsing or args.embedder or args.full:
            parser.error("--corpus mixed runs alone: no --folder, --full, --compare-*, --embedder")
        run_mixed(args)
        return
    corpus_dir = None
    folder = args.folder
    if folder is None:
        corpus_dir = Path(tempfile.mkdtemp(prefix="ingest-bench-corpus-"))
        generate_corpus(corpus_dir, args.docs, args.mean_kb, args.seed)
        folder = corpus_dir
    try:
        with embedded_server() as server_uri:
            print(machine_line(server_uri))
            source = (
                str(args.folder)
                if args.folder
                else (f"generated: {args.docs} txt/md/html files, mean {args.mean_kb:g} KiB, seed {args.seed}")
            )
            if args.compare_target:
                print(f"corpus: {source}")
                compare(server_uri, folder, args)
                return
            if args.compare_parsing:
                print(f"corpus: {source}")
                compare_parsing(server_uri, folder, args)
                return
            if args.embedder:
                print(f"corpus: {source}")
                compare_embedders(server_uri, folder, args)
                return
            run = ingest(create_database(server_uri, "bench_ingest", migrate=True), folder, args)
            print(f"corpus: {source}; {run.files} files, {run.mb:.2f} MB")
            print_run(run, args)
    finally:
        if corpus_dir:
            shutil.rmtree(corpus_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
