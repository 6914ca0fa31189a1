"""How `ingest mcp` runs its server (integrations/mcp_server.py): over stdio until the client
closes stdin, or streamable HTTP on 127.0.0.1 until it is stopped; both stop on SIGINT or
SIGTERM, and the command exits 0.

The SDK reads stdin in a worker thread that a cancellation cannot interrupt (the read waits
for the client's next line), so a signal could not stop a server run in the main thread
without the client's help: the server runs in a daemon thread, and the main thread waits for
it to end or for a signal. HTTP then gets uvicorn's graceful shutdown (bounded); stdio's
thread ends with the process.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

from ingestion_pipeline.api import IngestError

STOP_GRACE_SECONDS = 10  # for the HTTP server's open sessions after SIGINT or SIGTERM


class _Stop(Exception):
    """SIGINT or SIGTERM arrived (raised by the handler, in the main thread)."""


def serve_stdio(server: MCPServer) -> None:
    """Until the client closes stdin (EOF), or SIGINT or SIGTERM."""
    _run_until_stopped(lambda: anyio.run(server.run_stdio_async), stop=None)


def listen(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:`port` (0: a free port), bound before the server
    starts so that a port in use is one line, and the address is known when announced."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise IngestError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    return sock


def serve_http(server: MCPServer, sock: socket.socket) -> None:
    """Streamable HTTP at /mcp on `sock`, until SIGINT or SIGTERM, which close the
    sessions open and stop (uvicorn's graceful shutdown, bounded). Its address is announced
    on stderr once a signal stops it cleanly: whoever waits for that line may send one."""
    config = uvicorn.Config(
        server.streamable_http_app(), log_level="warning", timeout_graceful_shutdown=STOP_GRACE_SECONDS
    )
    http = uvicorn.Server(config)

    def stop() -> None:
        http.should_exit = True

    host, port = sock.getsockname()[:2]

    def announce() -> None:
        print(f"ingest mcp: serving http://{host}:{port}/mcp", file=sys.stderr, flush=True)

    _run_until_stopped(lambda: http.run(sockets=[sock]), stop=stop, started=announce)


def _run_until_stopped(
    run: Callable[[], None], stop: Callable[[], None] | None, started: Callable[[], None] | None = None
) -> None:
    """`run` in a daemon thread until it returns or a signal comes; then `stop` it and wait
    for it (a while), or, without `stop`, leave it to end with the process. `started` is
    called once the signals are handled."""
    finished = threading.Event()
    failed: list[BaseException] = []

    def target() -> None:
        try:
            run()
        except BaseException as exc:  # noqa: BLE001 - raised again in the main thread below
            failed.append(exc)
        finally:
            finished.set()

    thread = threading.Thread(target=target, name="ingest-mcp", daemon=True)
    try:
        with _signals_stop():
            thread.start()
            if started is not None:
                started()
            finished.wait()
    except _Stop:
        if stop is not None:
            stop()
            thread.join(STOP_GRACE_SECONDS + 5)
        return
    if failed and isinstance(failed[0], SystemExit):  # uvicorn's way out when it cannot start
        if failed[0].code not in (0, None):
            raise IngestError(f"the MCP server stopped (exit status {failed[0].code})")
    elif failed:
        raise failed[0]


@contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGINT and SIGTERM raise _Stop in the main thread, where `finished.wait()` blocks."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signum)

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
