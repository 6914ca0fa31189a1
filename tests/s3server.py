"""A local S3 API over real HTTP for the sync tests: moto's server (what s3fs and fsspec are
tested against) behind a small proxy that injects faults into listings (a status for every
listing after the first N, or an AccessDenied for one prefix), so a listing fails part-way
exactly where a test says."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from moto.server import ThreadedMotoServer

ERROR_BODY = "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{code}</Message></Error>"


@dataclass
class Faults:
    """Listings (ListObjectsV2 requests) answered with an error instead of moto's answer."""

    listings_before_failure: int | None = None  # this many listings pass, then every one fails
    failure_status: int = 500
    denied_prefix: str | None = None  # a listing of a prefix starting with it: 403 AccessDenied
    listings: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verdict(self, query: dict[str, list[str]]) -> tuple[int, str] | None:
        if "list-type" not in query:
            return None
        prefix = query.get("prefix", [""])[0]
        if self.denied_prefix is not None and prefix.startswith(self.denied_prefix):
            return 403, "AccessDenied"
        with self.lock:
            self.listings += 1
            if self.listings_before_failure is not None and self.listings > self.listings_before_failure:
                return self.failure_status, "InternalError" if self.failure_status >= 500 else "SlowDown"
        return None

    def clear(self) -> None:
        self.listings_before_failure = self.denied_prefix = None
        self.failure_status = 500
        self.listings = 0


@dataclass
class S3Server:
    endpoint: str  # the proxy's URL: what AWS_ENDPOINT_URL points at
    faults: Faults

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "1",  # an injected error is final, not retried by botocore
        }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _proxy_handler(upstream_port: int, faults: Faults) -> type[BaseHTTPRequestHandler]:
    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            verdict = faults.verdict(parse_qs(urlsplit(self.path).query))
            if verdict is not None:
                status, code = verdict
                payload = ERROR_BODY.format(code=code).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            answer = upstream.getresponse()
            payload = answer.read()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                    self.send_header(name, value)
            # a HEAD answer says how long the object is, with no body
            length = answer.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            upstream.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

    return Proxy


def reset(server: S3Server) -> None:
    """No bucket, no fault: moto keeps its buckets in the process, across tests and servers."""
    address = urlsplit(server.endpoint)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
    connection.request("POST", "/moto-api/reset")
    assert connection.getresponse().status == 200
    connection.close()
    server.faults.clear()


@contextmanager
def s3_server() -> Iterator[S3Server]:
    moto_port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
    moto.start()
    faults = Faults()
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(moto_port, faults))
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    server = S3Server(f"http://127.0.0.1:{proxy.server_address[1]}", faults)
    reset(server)
    try:
        yield server
    finally:
        proxy.shutdown()
        proxy.server_close()
        moto.stop()
