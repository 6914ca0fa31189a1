"""The resident search process: answers `ingest search` for one key (search_client.py).

    python -P -m ingestion_pipeline.cli.search_server FOLDER NAME LOCK_FD

Started by a search nothing answered, with that search's environment and working folder, and
the key's lock (an flock its starter took, on descriptor LOCK_FD), which it holds while it
lives: one process per key. It loads the settings and the embedder's model once, then listens
on FOLDER/NAME.sock (0600, in the user's 0700 folder) and answers one search at a time: the
arguments are parsed and run by `execute`, as `ingest` runs them, with stdout and stderr
recorded and sent back. Each search opens its own connections and closes them, so between
searches it holds no connection and no database lock.

It leaves, removing its socket and status file, after INGEST_SEARCH_SERVER_IDLE_SECONDS without
a search (default 10 minutes), when its key's inputs change (the package edited or upgraded,
the .env file, the working folder gone), when its socket is removed, or on SIGTERM. FOLDER/
NAME.json says its pid and how many searches it answered; FOLDER/NAME.log holds what it
logged (its last start's only)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import logging
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestion_pipeline.cli.search_client import key, peer_uid

if TYPE_CHECKING:
    from ingestion_pipeline.settings import Settings

log = logging.getLogger(__name__)

POLL_SECONDS = 5.0  # how often an idle process checks whether its key's inputs changed
READ_TIMEOUT_SECONDS = 10.0  # a request is one line sent at once
MAX_REQUEST_BYTES = 1 << 20


class Recorded(io.TextIOBase):
    """A text stream whose writes go to `chunks` as (stream number, text), in order."""

    def __init__(self, chunks: list[list[Any]], number: int) -> None:
        self.chunks = chunks
        self.number = number

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.chunks and self.chunks[-1][0] == self.number:
            self.chunks[-1][1] += text
        else:
            self.chunks.append([self.number, text])
        return len(text)


class CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Logs to whatever sys.stderr is when a record is written: the request's, during one."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class Leave(BaseException):
    """SIGTERM: leave now, through the `finally` that removes the socket (not an Exception,
    nor a SystemExit, which a search's usage error raises)."""


def leave(*_: object) -> None:
    raise Leave


class Server:
    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name
        self.socket_path = folder / f"{name}.sock"
        self.status_path = folder / f"{name}.json"
        self.served = 0
        self.inode: int | None = None
        self.parser: argparse.ArgumentParser | None = None
        self.settings: dict[str, Settings] = {}

    def search_parser(self) -> argparse.ArgumentParser:
        """`ingest search`'s parser, made once (parsing leaves it as it was)."""
        from ingestion_pipeline.cli import build_parser

        if self.parser is None:
            self.parser = build_parser("search")
        return self.parser

    def settings_of(self, **overrides: str) -> Settings:
        """The settings as `load_settings` reads them, kept per --database-url: what they read
        (the environment, ./.env) is in the key, and this process leaves when that changes."""
        from ingestion_pipeline.settings import load_settings

        cached = overrides.get("database_url", "")
        if cached not in self.settings:
            self.settings[cached] = load_settings(**overrides)  # an error is raised again next time
        return self.settings[cached]

    def run(self) -> int:
        from ingestion_pipeline.errors import IngestError
        from ingestion_pipeline.settings import load_settings

        if self.changed():
            log.warning("the key's inputs changed before this process started: leaving")
            return 0
        try:
            settings = load_settings()
        except IngestError as exc:  # every search says so, in its own process
            log.warning("not serving: %s", exc)
            return 0
        if settings.search_server == "off":  # set in .env, which the searches do not read
            return 0
        self.settings[""] = settings
        warm(settings)
        self.search_parser()
        listener = self.listen()
        try:
            self.write_status()
            self.serve(listener, settings.search_server_idle_seconds)
        finally:
            listener.close()
            self.remove()
        return 0

    def listen(self) -> socket.socket:
        # This process holds the key's lock: a socket file here is a gone process's (stale).
        self.socket_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(0o177)  # the socket is made 0600: the user's alone
        try:
            listener.bind(str(self.socket_path))
        finally:
            os.umask(previous)
        self.inode = self.socket_path.stat().st_ino
        listener.listen(16)
        return listener

    def serve(self, listener: socket.socket, idle_seconds: float) -> None:
        last = time.monotonic()
        while (remaining := last + idle_seconds - time.monotonic()) > 0:
            listener.settimeout(min(POLL_SECONDS, remaining))
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if self.changed():
                    return
                continue
            with conn:
                self.answer(conn)
            last = time.monotonic()

    def answer(self, conn: socket.socket) -> None:
        # The folder is the user's and private (0700) and the socket 0600: only the user's
        # processes (and root) can connect. A search runs with the user's database credentials
        # and may show a private collection's text, so the peer is checked too: only a process
        # of this user (who could run the search itself) is answered, even if the folder's mode
        # were changed or the socket reached another way.
        if peer_uid(conn) != os.getuid():
            return
        conn.settimeout(READ_TIMEOUT_SECONDS)
        try:
            data = b""
            while len(data) <= MAX_REQUEST_BYTES and (block := conn.recv(1 << 16)):
                data += block
            request = json.loads(data)
            argv, columns = request["argv"], int(request["columns"])
            if not (isinstance(argv, list) and all(isinstance(arg, str) for arg in argv) and argv[:1] == ["search"]):
                raise ValueError("not a search's arguments")
        except (OSError, ValueError, KeyError, TypeError):
            return  # the client sees no reply and searches in its own process
        reply = self.search(argv, columns)
        with contextlib.suppress(OSError):  # the client left (^C): nothing to tell it
            conn.sendall(json.dumps(reply).encode())
        self.served += 1
        self.write_status()

    def search(self, argv: list[str], columns: int) -> dict[str, Any]:
        """The search `ingest ARGV` runs, its output recorded: {"output", "code"}; or
        {"fallback": why}, which makes the client run it in its own process."""
        from ingestion_pipeline.cli import execute
        from ingestion_pipeline.db import connection

        # What one `ingest` process remembers of its own start: the embedded servers it started
        # (named in messages) and the note about an earlier release's folder, said once.
        connection._EMBEDDED_FOLDERS.clear()
        connection._HINTED.clear()
        chunks: list[list[Any]] = []
        previous = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = str(columns)  # argparse wraps its usage to the client's terminal
        try:
            with contextlib.redirect_stdout(Recorded(chunks, 1)), contextlib.redirect_stderr(Recorded(chunks, 2)):
                try:
                    args = self.search_parser().parse_args(argv)
                    if args.no_server:
                        return {"fallback": "--no-server"}
                    code = execute(args, self.settings_of)
                except SystemExit as exc:  # argparse's usage errors (2)
                    code = exit_status(exc, chunks)
        except Exception:  # noqa: BLE001 (any error: the client's own run shows its traceback)
            log.warning("search %s failed here:\n%s", argv, traceback.format_exc())
            return {"fallback": "error"}
        finally:
            if previous is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = previous
        return {"output": chunks, "code": code}

    def changed(self) -> bool:
        """True when this process should leave: its key's inputs changed, or its socket was
        removed or replaced."""
        try:
            if self.inode is not None and self.socket_path.stat().st_ino != self.inode:
                return True
            return not key().startswith(self.name.removeprefix("search-"))
        except OSError:  # the socket, or the working folder, is gone
            return True

    def write_status(self) -> None:
        status = {"pid": os.getpid(), "served": self.served, "socket": str(self.socket_path)}
        partial = self.status_path.with_suffix(".json.partial")
        partial.write_text(json.dumps(status))
        partial.replace(self.status_path)

    def remove(self) -> None:
        """The socket (when still this process's), the status file and an empty log. The lock
        file stays: a starter may hold it open, and another one made in its place would let
        two processes of one key run."""
        with contextlib.suppress(OSError):
            if self.socket_path.stat().st_ino == self.inode:
                self.socket_path.unlink()
        self.status_path.unlink(missing_ok=True)
        log_path = self.folder / f"{self.name}.log"
        with contextlib.suppress(OSError):
            if log_path.stat().st_size == 0:
                log_path.unlink()


def exit_status(exc: SystemExit, chunks: list[list[Any]]) -> int:
    """The status the interpreter would exit with (a message is printed to stderr, status 1)."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    Recorded(chunks, 2).write(f"{exc.code}\n")
    return 1


def warm(settings: Any) -> None:
    """Import what a search imports and read the embedder's model, before listening."""
    from ingestion_pipeline.processing import embedder_from_settings

    for module in ("ingestion_pipeline.db.ready", "ingestion_pipeline.search"):
        importlib.import_module(module)
    try:
        embedder = embedder_from_settings(settings)
        warm_model = getattr(embedder, "warm", None)  # static models: read them now
        if callable(warm_model):
            warm_model()
    except Exception:  # noqa: BLE001 (any error: each search reports it, in its own process)
        log.warning("the embedder did not load:\n%s", traceback.format_exc())


def main() -> int:
    from ingestion_pipeline.cli import LOG_FORMAT

    folder, name, lock = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.set_inheritable(lock, False)  # held (and so the key's lock) until this process ends
    handler = CurrentStderr()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])  # `ingest`'s, with the request's stderr
    signal.signal(signal.SIGTERM, leave)
    try:
        return Server(Path(folder), name).run()
    except Leave:
        return 0


if __name__ == "__main__":
    sys.exit(main())
