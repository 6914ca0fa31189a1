"""A real Dagster (webserver + daemon) started the way users start it, and GraphQL on it.

`LiveDagster.start` runs a command (`ingest ui …` or `dagster dev …`) in its own session
on a free port, with an environment stripped of the caller's INGEST_/DAGSTER_ settings,
and waits until the code location has loaded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from ingestion_pipeline.db import embedded
from tests.search_server_off import SEARCH_SERVER_OFF

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCATION_QUERY = """{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError {
  __typename ... on RepositoryLocation { repositories { name jobs { name } sensors { name } schedules { name }
  assetNodes { assetKey { path } } } }
  ... on PythonError { message } } } } } }"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("INGEST_", "DAGSTER_")) and k != "DATABASE_URL"
    } | SEARCH_SERVER_OFF
    return {**env, "INGEST_DATA_DIR": str(data_dir), **extra}


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def gone(processes: list[psutil.Process], timeout: float = 10) -> list[int]:
    """The pids still alive (zombies count as gone) after waiting up to `timeout`."""

    def alive(process: psutil.Process) -> bool:
        try:
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + timeout
    while any(alive(p) for p in processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [p.pid for p in processes if alive(p)]


@dataclass
class LiveDagster:
    proc: subprocess.Popen
    port: int
    log_path: Path

    @classmethod
    def start(
        cls, command: list[str], *, env: dict, log_path: Path, cwd: Path = ROOT, timeout: float = 180
    ) -> LiveDagster:
        port = free_port()
        log = log_path.open("w")
        proc = subprocess.Popen(
            [*command, "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        live = cls(proc, port, log_path)
        try:
            live.wait_for_location(timeout)
        except BaseException:
            # The caller's cleanup never runs for a start that failed: leave nothing behind.
            live.kill_everything()
            if env.get("INGEST_DATA_DIR"):
                embedded.stop(Path(env["INGEST_DATA_DIR"]))
            raise
        return live

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 30) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http://127.0.0.1, our server
            answer = json.loads(response.read())
        assert not answer.get("errors"), answer["errors"]
        return answer["data"]

    def repository(self) -> dict | None:
        try:
            data = self.graphql(LOCATION_QUERY, timeout=5)
        except OSError:
            return None
        entries = data["workspaceOrError"].get("locationEntries") or []
        location = entries[0].get("locationOrLoadError") if entries else None
        if location and location["__typename"] == "PythonError":
            raise AssertionError(f"code location failed to load: {location['message']}")
        repositories = (location or {}).get("repositories") or []
        return repositories[0] if repositories else None

    def wait_for_location(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, self.log_tail()
            assert time.monotonic() < deadline, "Dagster did not come up: " + self.log_tail()
            repository = self.repository()
            if repository:
                return repository
            time.sleep(0.5)

    def wait_for(self, what: str, probe, timeout: float = 180, every: float = 1.0):
        """Poll `probe()` until it returns something truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            assert self.proc.poll() is None, self.log_tail()
            assert time.monotonic() < deadline, f"timed out waiting for {what}: " + self.log_tail()
            time.sleep(every)

    def kill_everything(self) -> None:
        """Last resort for teardown: the command and every process under it, including
        the process groups it started (`ingest ui` runs Dagster in a group of its own)."""
        try:
            family = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        for process in family:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(process.pid), signal.SIGKILL)
        self.proc.wait(timeout=30)
