"""The queue's metrics, read from the database at each scrape: one RPC call
(ingestion_queue_metrics), so a scrape counts the work of every worker and costs one read.

The totals that only grow are counters (claims, completions: Prometheus's rate() gives their
rate); the failed jobs by format too, with the caveat docs/metrics.md states (`ingest retry`
takes jobs out of it, which Prometheus reads as a counter reset). The rest are gauges."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import psycopg
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ingestion_pipeline.db.models import QueueMetrics
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.metrics.searches import search_latency
from ingestion_pipeline.processing import format_name

if TYPE_CHECKING:
    from ingestion_pipeline.db.rpc import IngestionRpc

log = logging.getLogger(__name__)
DRAIN_WINDOW_SECONDS = 60  # completed_last_minute's window
UP_HELP = "1 when this scrape read the queue from the database, else 0"


class QueueCollector:
    """Reads the queue at each collect. `before_read` runs first (the search probe, whose
    latency the histogram registered after this collector then shows)."""

    def __init__(self, rpc: IngestionRpc, before_read: Callable[[], None] | None = None) -> None:
        self._rpc = rpc
        self._before_read = before_read

    def collect(self) -> Iterator[Metric]:
        if self._before_read is not None:
            self._before_read()
        began = time.monotonic()
        try:
            metrics = self._rpc.queue_metrics()
        except (psycopg.Error, IngestError) as exc:  # a scrape says the database is down; it does not fail
            log.warning("could not read the queue's metrics: %s", exc)
            yield _gauge("ingest_database_up", UP_HELP, 0)
            return
        yield _gauge("ingest_database_up", UP_HELP, 1)
        yield _gauge("ingest_metrics_read_seconds", "how long the read of the queue took", time.monotonic() - began)
        yield from queue_families(metrics)


def queue_families(m: QueueMetrics) -> Iterator[Metric]:
    """The metric families of one reading of the queue."""
    jobs = GaugeMetricFamily("ingest_jobs", "jobs by status: the queue's depth", labels=["status"])
    for status, count in m.by_status().items():
        jobs.add_metric([status], count)
    yield jobs
    yield _gauge("ingest_jobs_retry_waiting", "pending jobs waiting out a retry delay", m.retry_waiting)
    yield _counter("ingest_job_claims", "claims of jobs by any worker (the sum of the jobs' lease tokens)", m.claims)
    yield _counter("ingest_jobs_completed", "jobs completed (a document indexed)", m.completed)
    failed = CounterMetricFamily(
        "ingest_jobs_failed",
        "jobs failed for good, by format (falls when `ingest retry` queues them again)",
        labels=["format"],
    )
    for name, count in failed_by_format(m).items():
        failed.add_metric([name], count)
    yield failed
    yield _counter(
        "ingest_leases_dead_lettered", "jobs failed because their lease expired on the final attempt", m.dead_lettered
    )
    yield _gauge("ingest_leases_stale", "jobs in processing whose lease expired (awaiting a reclaim)", m.stale_leases)
    yield _gauge(
        "ingest_oldest_pending_age_seconds", "age of the oldest pending job (0 when none)", m.oldest_pending_seconds
    )
    yield _gauge("ingest_jobs_completed_last_minute", "jobs completed in the last 60 seconds", m.completed_last_minute)
    yield _gauge(
        "ingest_drain_docs_per_second",
        "documents completed per second over the last 60 seconds, by every worker",
        m.completed_last_minute / DRAIN_WINDOW_SECONDS,
    )


def failed_by_format(m: QueueMetrics) -> dict[str, int]:
    """Failed jobs by the format names `ingest work` reports (types of one name summed)."""
    names: dict[str, int] = {}
    for mime_type, count in m.failed_by_format.items():
        name = format_name(mime_type or None)
        names[name] = names.get(name, 0) + count
    return names


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def queue_registry(
    rpc: IngestionRpc, probe: Callable[[], None] | None = None
) -> tuple[CollectorRegistry, Callable[[], None]]:
    """The registry `ingest metrics` serves, and the call that stops its search observer.
    The queue's collector is registered first: a registry collects in registration order,
    so the probe search it runs shows in the histogram of the same scrape."""
    registry = CollectorRegistry()
    registry.register(QueueCollector(rpc, before_read=probe))
    return registry, search_latency(registry)
