"""Serving a registry at /metrics over HTTP: prometheus_client's server, in a daemon thread
that answers each request in a thread of its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server


@dataclass
class Served:
    """A /metrics server running in a daemon thread."""

    server: WSGIServer
    thread: Thread
    on_stop: Callable[[], None] | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
        if self.on_stop is not None:
            self.on_stop()


def serve(registry: CollectorRegistry, host: str, port: int, on_stop: Callable[[], None] | None = None) -> Served:
    server, thread = start_http_server(port, addr=host, registry=registry)
    return Served(server, thread, on_stop)
