"""`ingest metrics`: the queue (and searches) in Prometheus text format at /metrics."""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import add_database_url, non_negative_int
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.extras import install_hint
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.search import MODES
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands

DEFAULT_PORT = 9477


def register(commands: Commands) -> None:
    parser = commands.add_parser(
        "metrics",
        help="serve the queue's metrics in Prometheus text format at /metrics (the [metrics] extra)",
        description="Each scrape reads the queue from the database (one read-only call), so it counts the "
        "work of every worker: jobs by status, claims, completions, failures by format, stale leases, the "
        "oldest pending job's age and documents/s. Runs until Ctrl-C or SIGTERM. See docs/metrics.md.",
    )
    parser.add_argument(
        "--port", type=non_negative_int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--probe-query",
        metavar="TEXT",
        help="run this search at each scrape: its latency fills ingest_search_latency_seconds",
    )
    parser.add_argument("--probe-mode", choices=MODES, help="the probe's mode (default: as `ingest search`)")
    parser.add_argument(
        "--probe-collection", dest="probe_collections", action="append", metavar="NAME", help="the probe's collection"
    )
    add_database_url(parser)
    parser.set_defaults(handler=cmd_metrics)


def cmd_metrics(args: argparse.Namespace, settings: Settings) -> int:
    try:  # the extra: without it, one line that says how to get it
        from ingestion_pipeline.metrics.exporter import serve
        from ingestion_pipeline.metrics.queue import queue_registry
        from ingestion_pipeline.metrics.searches import search_probe
    except ModuleNotFoundError as exc:
        if exc.name != "prometheus_client":
            raise
        raise IngestError(f"`ingest metrics` needs {install_hint('metrics')}") from None
    stop = _stop_on_signals()
    with migrated_pool(settings, application_name="ingest metrics") as pool:
        probe = None
        if args.probe_query:
            embedder = None if args.probe_mode == "lexical" else embedder_from_settings(settings)
            probe = search_probe(
                pool, args.probe_query, mode=args.probe_mode, embedder=embedder, collections=args.probe_collections
            )
        registry, stop_observing = queue_registry(IngestionRpc(pool, settings.stale_after_seconds), probe)
        try:
            served = serve(registry, args.host, args.port, on_stop=stop_observing)
        except OSError as exc:
            raise IngestError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
        # One line once it listens (with the port, when 0 chose it): scripts and tests wait for it.
        print(f"serving http://{_url_host(args.host)}:{served.port}/metrics", flush=True)
        stop.wait()
        served.stop()
    return 0


def _stop_on_signals() -> threading.Event:
    """Set by Ctrl-C or SIGTERM: the server stops between scrapes and the command exits 0."""
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    return stop


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
