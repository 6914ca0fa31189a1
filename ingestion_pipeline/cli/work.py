"""`ingest work`: run the worker without Dagster."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import add_database_url, non_negative_int, positive_int, print_json
from ingestion_pipeline.cli.progress import WorkProgress, drawn
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import embedder_choices, embedder_from_settings
from ingestion_pipeline.settings import Settings
from ingestion_pipeline.worker import Outcome, Worker, WorkerReport

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    work = commands.add_parser("work", help="claim and process jobs (without Dagster)")
    work.add_argument("--drain", action="store_true", help="exit once nothing is claimable")
    work.add_argument("--concurrency", type=positive_int, metavar="N", help="jobs at once (INGEST_WORKER_CONCURRENCY)")
    work.add_argument("--max-jobs", type=positive_int, metavar="N", help="stop after claiming N jobs")
    work.add_argument(
        "--parse-processes",
        type=non_negative_int,
        metavar="N",
        help="child processes that parse (INGEST_PARSE_PROCESSES, default one per core; "
        "0 parses in the worker's threads)",
    )
    work.add_argument(
        "--embedder",
        choices=embedder_choices(),
        help="embedding model (INGEST_EMBEDDER, default wordllama; openai reads INGEST_OPENAI_*, "
        "static INGEST_STATIC_MODEL_PATH)",
    )
    work.add_argument("--json", action="store_true", help="machine-readable summary")
    add_database_url(work)
    work.set_defaults(handler=cmd_work)


def cmd_work(args: argparse.Namespace, settings: Settings) -> int:
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            # Second Ctrl-C: abort now. Jobs in flight keep their leases until the stale
            # window passes; then a worker reclaims them, or, on their final attempt, a
            # worker or `ingest janitor` dead-letters them (they end failed).
            print(
                "\ningest: aborted; in-flight jobs will be retried once their leases expire (INGEST_STALE_AFTER_"
                "SECONDS), or fail if that was their last attempt",
                file=sys.stderr,
            )
            os._exit(130)
        print("\ningest: stopping after the jobs in flight (Ctrl-C again to abort)", file=sys.stderr)
        stop.set()

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    embedder = embedder_from_settings(settings, args.embedder)  # a bad configuration stops here, in one line
    try:
        with migrated_pool(settings) as pool:
            worker = Worker(
                pool,
                settings,
                label="cli",
                concurrency=args.concurrency,
                embedder=embedder,
                parse_processes=args.parse_processes,
            )
            progress = WorkProgress(IngestionRpc(pool), draw=drawn(args.json))
            try:
                report = worker.run(drain=args.drain, max_jobs=args.max_jobs, stop=stop, on_result=progress)
            finally:
                progress.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if args.json:
        print_json(report.as_dict())
    else:
        summary = report.as_dict()
        print(
            render_table(
                ["claimed", "completed", "failed", "retried", "lease_lost", "abandoned", "seconds", "docs/s"],
                [
                    [
                        summary[k]
                        for k in (
                            "claimed",
                            "completed",
                            "failed",
                            "retried",
                            "lease_lost",
                            "abandoned",
                            "seconds",
                            "docs_per_second",
                        )
                    ]
                ],
            )
        )
        print_formats(report)
    return exit_code(report)


def print_formats(report: WorkerReport) -> None:
    """Per format: how many documents ended how, a job's mean seconds and the format's share
    of the jobs' time (what the seconds are is said under the table)."""
    header, rows = report.format_table()
    if rows:
        print()
        print(render_table(header, rows))
        print(report.format_note())


def exit_code(report: WorkerReport) -> int:
    """0 when the database recorded an outcome for every job claimed: completed, failed
    (a document's own problem: unsupported, corrupt, empty, too large, or attempts
    exhausted; `ingest status` lists them), retried or lease_lost (another worker holds the
    job). 1 when a job was abandoned: its failure could not even be recorded (the database
    went away), so it waits for its lease to expire."""
    abandoned = report.counts[Outcome.ABANDONED.value]
    if abandoned:
        print(
            f"ingest: {abandoned} job(s) abandoned: their outcome could not be recorded; they are retried once "
            "their leases expire",
            file=sys.stderr,
        )
        return 1
    return 0
