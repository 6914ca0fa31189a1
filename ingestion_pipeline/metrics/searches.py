"""The latency of searches, as a Prometheus histogram, in the process that searches.

The database keeps no record of searches (the search RPC only reads), so their latency is
measured where they run: `search()` reports each one to the observers of search/timing.py,
and this histogram is one. `ingest metrics` shows its own probe searches in it
(`--probe-query`); an application, a retriever or an MCP server that searches through this
package exports its own with `serve_search_metrics` (docs/metrics.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg
from prometheus_client import CollectorRegistry, Histogram
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.errors import IngestError, first_line
from ingestion_pipeline.metrics.exporter import Served, serve
from ingestion_pipeline.processing import Embedder
from ingestion_pipeline.search import Mode, observe_searches, search

log = logging.getLogger(__name__)

SEARCH_LATENCY = "ingest_search_latency_seconds"
# Lexical searches take milliseconds, hybrid ones with a remote embedder up to seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def search_latency(registry: CollectorRegistry) -> Callable[[], None]:
    """Registers the histogram in `registry` and observes this process's searches into it;
    the result stops the observing."""
    histogram = Histogram(
        SEARCH_LATENCY,
        "latency of the searches this process ran (query embedding and search RPC), by mode",
        labelnames=["mode"],
        buckets=BUCKETS,
        registry=registry,
    )
    return observe_searches(lambda mode, seconds: histogram.labels(mode=mode).observe(seconds))


def serve_search_metrics(port: int, host: str = "127.0.0.1") -> Served:
    """Serves /metrics with this process's search latency histogram on host:port (0: a free
    port, `Served.port` says which), from a daemon thread; `Served.stop()` ends it."""
    registry = CollectorRegistry()
    stop_observing = search_latency(registry)
    return serve(registry, host, port, on_stop=stop_observing)


def search_probe(
    pool: ConnectionPool[psycopg.Connection[DictRow]],
    query: str,
    *,
    mode: Mode | None = None,
    embedder: Embedder | None = None,
    collections: list[str] | None = None,
) -> Callable[[], None]:
    """A search of `query` to run at each scrape of `ingest metrics`: what a client of this
    database waits for a search, seen from the exporter's host (synthetic: one query, one
    client; docs/metrics.md). A failed probe is logged, never a failed scrape."""

    def probe() -> None:
        try:
            with pool.connection() as conn:
                search(conn, query, mode=mode, limit=10, embedder=embedder, collections=collections)
        except (IngestError, psycopg.Error) as exc:
            log.warning("the search probe failed: %s", first_line(exc))

    return probe
