"""`ingest_corpus.py --embedder openai`: the corpus drained by `ingest work --drain` without
an embedder, with hash, and with openai against the package's local OpenAI-compatible
server (testing/ingest_testing/openai_server.py), rounds interleaved; medians.
`--embedder default`: without an embedder, and with the default one (wordllama, in the
parsing children): issue 47's bar, the default at >= 0.8x the docs/s of none."""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from common import connect, create_database, drop_database, median, print_table, server_cpu_seconds
from ingest_runs import Run, cell, ingest
from mixed_corpus import cpu_seconds, reap_orphans, subreaper


def embedder_configurations(server_url: str, key: str, model: str, args: argparse.Namespace) -> list[tuple]:
    """(label, environment of `ingest work`, the local server's added latency per request,
    the dimension of an HNSW index built before the drain or None)."""

    def openai(dimensions: int) -> dict:
        return {
            "INGEST_EMBEDDER": "openai",
            "INGEST_OPENAI_BASE_URL": server_url,
            "INGEST_OPENAI_MODEL": model,
            "INGEST_OPENAI_API_KEY": key,
            "INGEST_OPENAI_DIMENSIONS": str(dimensions),
            "INGEST_OPENAI_ENCODING_FORMAT": args.embed_encoding,
        }

    if args.embedder == "default":
        return [
            ("no embedder", {"INGEST_EMBEDDER": "none"}, 0.0, None),
            ("wordllama (256, the default), in the parsing children", {"INGEST_EMBEDDER": "wordllama"}, 0.0, None),
            # what a user's database has: `ingest db migrate` builds the index of the configured dimension
            ("wordllama, and its HNSW index (ingest db migrate)", {"INGEST_EMBEDDER": "wordllama"}, 0.0, 256),
        ]
    size, latency = args.embed_dimensions, args.embed_latency_ms
    return [
        ("no embedder", {"INGEST_EMBEDDER": "none"}, 0.0, None),
        ("hash (64), in the parsing children", {"INGEST_EMBEDDER": "hash"}, 0.0, None),
        ("openai (64), local server", openai(64), 0.0, None),
        (f"openai ({size}), local server", openai(size), 0.0, None),
        (f"openai ({size}), local server +{latency:g} ms/request", openai(size), latency / 1000, None),
    ]


@dataclass
class EmbedRun:
    run: Run
    requests: int  # answered by the local server during the drain, faults included
    server_cpu: float  # this process's CPU during the drain: the local server answering
    worker_cpu: float  # `ingest work`'s whole tree: the worker, its fork server, the parsing children
    database_cpu: float  # the PostgreSQL server's processes


def compare_embedders(server_uri: str, folder: Path, args: argparse.Namespace) -> None:
    """`ingest work --drain` (defaults) without an embedder, with hash, and with openai on the
    local server; a fresh database each, --rounds rounds interleaved; medians."""
    from ingest_testing.openai_server import OpenAIServer

    with OpenAIServer(api_key="bench-key") as server:
        configurations = embedder_configurations(server.url, server.api_key, server.model, args)
        runs: dict[str, list[EmbedRun]] = {label: [] for label, _, _, _ in configurations}
        for number in range(1, args.rounds + 1):
            for label, env, latency, hnsw in configurations:
                server.latency_seconds = latency
                uri = create_database(server_uri, "bench_ingest_embedders", migrate=True)
                if hnsw is not None:
                    from ingestion_pipeline.db.vector_index import ensure_hnsw_index

                    ensure_hnsw_index(uri, hnsw)
                with connect(uri) as conn:
                    conn.execute("checkpoint")
                requests, cpu = server.requests, time.process_time()
                database, children = server_cpu_seconds(uri), cpu_seconds(resource.getrusage(resource.RUSAGE_CHILDREN))
                known = {child.pid for child in psutil.Process().children()}
                with subreaper():  # the fork server outlives `ingest work`: reaped (and counted) here
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
                    reap_orphans(known)
                worker_cpu = cpu_seconds(resource.getrusage(resource.RUSAGE_CHILDREN)) - children
                database_cpu = server_cpu_seconds(uri) - database
                drop_database(server_uri, "bench_ingest_embedders")
                runs[label].append(
                    EmbedRun(run, server.requests - requests, time.process_time() - cpu, worker_cpu, database_cpu)
                )
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
            f"{median([e.worker_cpu for e in done]):.2f}",
            f"{median([e.database_cpu for e in done]):.2f}",
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
            "worker CPU s",
            "database CPU s",
            "vs no embedder",
        ],
        [row(label, done) for label, done in runs.items()],
    )
    print(
        "\ndrain s: from the start of `ingest work` to its exit (start-up included). embed p50: the embed "
        "stage of a job (openai: in the job's thread, requests of INGEST_OPENAI_BATCH_SIZE=32 chunks; hash: in "
        "the parsing children). server CPU: this process's CPU during the drain, i.e. the local server. worker CPU: "
        "`ingest work`'s whole tree (the worker, its fork server, the parsing children). database CPU: the "
        "PostgreSQL server's processes. "
        f"openai vectors as {args.embed_encoding}"
    )
