"""Observers of each search's latency, in the process that searches.

A search runs in its client (`ingest search`, the Python API, the retrievers, an MCP
server): the database keeps no record of it, so its latency is known only where it ran.
`search()` reports each search that returned (mode, seconds: the query's embedding and the
RPC) to the observers registered here; with none registered it costs one empty loop.
`ingestion_pipeline.metrics` registers a Prometheus histogram (docs/metrics.md); this module
imports nothing optional, so any process may be observed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

SearchObserver = Callable[[str, float], None]  # (mode, seconds)

_observers: list[SearchObserver] = []
_lock = threading.Lock()


def observe_searches(observer: SearchObserver) -> Callable[[], None]:
    """Calls `observer(mode, seconds)` after each search of this process that returns; the
    result stops it."""
    with _lock:
        _observers.append(observer)

    def stop() -> None:
        with _lock:
            if observer in _observers:
                _observers.remove(observer)

    return stop


def report(mode: str, seconds: float) -> None:
    for observer in tuple(_observers):  # a copy: an observer may stop itself
        observer(mode, seconds)
