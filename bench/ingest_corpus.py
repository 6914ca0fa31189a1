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
the test utilities (testing/ingest_testing/openai_server.py: a thread of
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
import shutil
import tempfile
from pathlib import Path

from common import (
    command_line,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    median,
    print_table,
)
from ingest_embedders import compare_embedders
from ingest_runs import COMPARED, Run, cell, generate_corpus, ingest, print_run
from mixed_corpus import run_mixed


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
        choices=["openai", "default"],
        help="openai: `ingest work --drain` without an embedder, with hash, and with "
        "INGEST_EMBEDDER=openai against a local OpenAI-compatible server; default: without an "
        "embedder and with the default one (wordllama); --rounds rounds each",
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
