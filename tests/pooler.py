"""A real PgBouncer in transaction mode in front of a test database (Debian `pgbouncer`;
.ci/run installs it). Two entries: `<db>` with a pool of several server connections, and
`<db>_one` with a single one, where every client's transactions share one server
connection (which makes statement-name collisions deterministic)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.tools import find_tool, require_tools

EMBEDDED_USER = "embedded_postgres"


@dataclass(frozen=True)
class Pooler:
    port: int
    dbname: str
    user: str

    def url(self, *, single_server_connection: bool = False) -> str:
        name = f"{self.dbname}_one" if single_server_connection else self.dbname
        return f"host=127.0.0.1 port={self.port} dbname={name} user={self.user}"


def pgbouncer_binary() -> str:
    require_tools(["pgbouncer"], "a test through PgBouncer")
    return find_tool("pgbouncer") or "pgbouncer"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def pgbouncer(db_url: str, **settings: object) -> Iterator[Pooler]:
    """Start PgBouncer (transaction mode) in front of the database of `db_url`; `settings`
    are more lines of its [pgbouncer] section (e.g. server_login_retry=1). Its files
    live in a folder of their own under /tmp: PgBouncer refuses to run as root, so it runs
    as another user, who cannot enter pytest's private tmp_path."""
    folder = Path(tempfile.mkdtemp(prefix="ingest-pgbouncer-"))
    try:
        with _running(db_url, folder, settings) as pooler:
            yield pooler
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _running(db_url: str, folder: Path, settings: dict[str, object]) -> Iterator[Pooler]:
    binary = pgbouncer_binary()
    target = psycopg.conninfo.conninfo_to_dict(db_url)
    host, dbname, user = target.get("host") or "127.0.0.1", target["dbname"], target.get("user") or "postgres"
    port = _free_port()
    folder.chmod(0o777)
    server = f"host={host} port={target.get('port') or 5432} dbname={dbname} user={user}"
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    config = folder / "pgbouncer.ini"
    config.write_text(
        f"""[databases]
{dbname} = {server} pool_size=8
{dbname}_one = {server} pool_size=1

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
logfile = {folder / "pgbouncer.log"}
pidfile = {folder / "pgbouncer.pid"}
"""
        + "".join(f"{key} = {value}\n" for key, value in settings.items())
    )
    for path in folder.iterdir():
        path.chmod(0o666)
    command = [binary, str(config)]
    if os.geteuid() == 0:
        command[1:1] = ["-u", EMBEDDED_USER if _user_exists(EMBEDDED_USER) else "nobody"]
    # Its output goes to a file, never to a pipe: in the foreground PgBouncer writes every
    # log line to stderr too, and once a pipe nobody reads holds 64 KB (a few hundred client
    # logins) it blocks in write() and stops serving.
    with (folder / "pgbouncer.out").open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    pooler = Pooler(port, dbname, user)
    try:
        _wait_until_it_answers(pooler, process, folder)
        yield pooler
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _wait_until_it_answers(pooler: Pooler, process: subprocess.Popen, folder: Path) -> None:
    deadline = time.monotonic() + 15
    while True:
        if process.poll() is not None:
            log = (folder / "pgbouncer.log").read_text() if (folder / "pgbouncer.log").exists() else ""
            output = (folder / "pgbouncer.out").read_text(errors="replace")
            raise RuntimeError(f"pgbouncer exited ({process.returncode}): {output} {log}")
        try:
            with psycopg.connect(pooler.url(), connect_timeout=2) as conn:
                conn.execute("select 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
