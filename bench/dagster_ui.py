"""The machinery of dagster_path.py: `ingest ui` started as a user starts it and read over
GraphQL, and a sampler of the CPU each kind of process uses while a path drains."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import psutil
from common import ROOT

BIN = ROOT / ".venv" / "bin"


class CpuSampler:
    """CPU seconds used on the machine by kind of process while a path drains: processes
    are sampled every 0.2 s (a run worker, a child the code server spawns, ends before the
    window does, so its last sample
    counts), and a process that existed at the start counts only what it used after it."""

    KINDS = (
        ("postgres", "postgres"),
        ("multiprocessing.forkserver", "parsing children"),
        ("multiprocessing.spawn", "drain runs (spawned by the code server)"),
        ("ingest work", "ingest work"),
        ("dagster", "dagster services"),
        ("dg dev", "dagster services"),
        ("ingest ui", "dagster services"),
    )

    def __init__(self):
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def kind(self, process: psutil.Process) -> str | None:
        line = " ".join(process.cmdline())
        return next((kind for needle, kind in self.KINDS if needle in line), None)

    def sample(self, initial: bool = False) -> None:
        for process in psutil.process_iter():
            if process.pid == os.getpid():  # this script's name says "dagster" too
                continue
            try:
                kind = self.kind(process)
                if kind is None:
                    continue
                times = process.cpu_times()
                used = times.user + times.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            self.first.setdefault(process.pid, used if initial else 0.0)
            self.last[process.pid] = (kind, used)

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            self.sample()

    def __enter__(self) -> CpuSampler:
        self.sample(initial=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self.sample()

    def summary(self) -> str:
        totals: dict[str, float] = {}
        for pid, (kind, used) in self.last.items():
            totals[kind] = totals.get(kind, 0.0) + used - self.first.get(pid, 0.0)
        return ", ".join(f"{kind} {seconds:.1f}" for kind, seconds in sorted(totals.items()))


class DagsterUI:
    """`ingest ui` in its own session on a free port."""

    def __init__(self, env: dict, log: Path):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.log = log
        self.proc = subprocess.Popen(
            [str(BIN / "ingest"), "ui", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - http://127.0.0.1, our own server
            return json.loads(response.read())["data"]

    def wait_ready(self, timeout: float = 240) -> None:
        """Until the import sensor has ticked once: the daemon and code server are warm."""
        query = (
            '{ sensorOrError(sensorSelector: {repositoryName: "__repository__", repositoryLocationName: '
            '"ingestion_pipeline", sensorName: "import_batch_sensor"}) '
            "{ ... on Sensor { sensorState { ticks(limit: 1) { status } } } } }"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ingest ui exited: " + self.log.read_text()[-3000:])
            try:
                ticks = self.graphql(query)["sensorOrError"]["sensorState"]["ticks"]
                if ticks:
                    return
            except (OSError, KeyError, TypeError):
                pass
            time.sleep(0.5)
        raise RuntimeError("Dagster did not come up: " + self.log.read_text()[-3000:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
