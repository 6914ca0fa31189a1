"""`ingest work`: run the worker without Dagster."""

from __future__ import annotations

import signal
import sys
import threading

from tqdm import tqdm

from ingestion_pipeline.cli.common import add_database_url, migrated_pool, print_json
from ingestion_pipeline.processing import get_embedder
from ingestion_pipeline.settings import Settings
from ingestion_pipeline.tables import render_table
from ingestion_pipeline.worker import Worker


def register(commands) -> None:
    work = commands.add_parser("work", help="claim and process jobs (without Dagster)")
    work.add_argument("--drain", action="store_true", help="exit once nothing is claimable")
    work.add_argument("--concurrency", type=int, metavar="N", help="jobs at once (INGEST_WORKER_CONCURRENCY)")
    work.add_argument("--max-jobs", type=int, metavar="N", help="stop after claiming N jobs")
    work.add_argument("--embedder", choices=["none", "hash"], help="embedding model (INGEST_EMBEDDER)")
    work.add_argument("--json", action="store_true", help="machine-readable summary")
    add_database_url(work)
    work.set_defaults(handler=cmd_work)


def cmd_work(args, settings: Settings) -> int:
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def first_interrupt(signum, frame):
        # First Ctrl-C: claim nothing more, let jobs in flight finish. Second: abort.
        print("\ningest: stopping after the jobs in flight (Ctrl-C again to abort)", file=sys.stderr)
        stop.set()
        signal.signal(signal.SIGINT, previous)

    signal.signal(signal.SIGINT, first_interrupt)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with migrated_pool(settings) as pool:
            worker = Worker(pool, settings, label="cli", concurrency=args.concurrency,
                            embedder=get_embedder(args.embedder or settings.embedder))
            progress = tqdm(unit="doc", desc="work", disable=args.json or not sys.stderr.isatty(), file=sys.stderr)
            with progress:
                report = worker.run(drain=args.drain, max_jobs=args.max_jobs, stop=stop,
                                    on_result=lambda r: progress.update())
    finally:
        signal.signal(signal.SIGINT, previous)
    if args.json:
        print_json(report.as_dict())
    else:
        summary = report.as_dict()
        print(render_table(["claimed", "completed", "failed", "retried", "lease_lost", "abandoned", "seconds",
                            "docs/s"],
                           [[summary[k] for k in ("claimed", "completed", "failed", "retried", "lease_lost",
                                                  "abandoned", "seconds", "docs_per_second")]]))
    return 0
