"""The embedded PostgreSQL server: start/reuse, status without side effects, stop, and two
processes asking for it at once. Each test owns a data dir and stops its server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ingestion_pipeline.db import embedded
from ingestion_pipeline.db.connection import connect
from tests.helpers import postmasters


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "data"
    try:
        yield folder
    finally:
        embedded.stop(folder)


def select_one(uri: str) -> int:
    with connect(uri) as conn:
        return conn.execute("select 1 as one").fetchone()["one"]


def test_start_returns_a_uri_that_connects(data_dir):
    uri = embedded.start(data_dir)
    assert select_one(uri) == 1
    state = embedded.status(data_dir)
    assert state.running and state.pgdata == data_dir.resolve() / "pgdata"


def test_start_again_reuses_the_running_server(data_dir):
    started: list[str] = []  # on_start: called by the start that started the server only
    first = embedded.start(data_dir, on_start=started.append)
    pid = embedded.status(data_dir).pid

    second = embedded.start(data_dir, on_start=started.append)

    assert second == first and started == [first]
    assert embedded.status(data_dir).pid == pid
    assert postmasters(embedded.pgdata_path(data_dir)) == [pid]


def test_status_before_start_is_not_running_and_starts_nothing(data_dir):
    state = embedded.status(data_dir)

    assert not state.running and state.pid is None and state.uri is None
    assert not embedded.pgdata_path(data_dir).exists()
    assert postmasters(embedded.pgdata_path(data_dir)) == []


def test_stop_stops_and_start_works_again(data_dir):
    embedded.start(data_dir)
    pid = embedded.status(data_dir).pid

    assert embedded.stop(data_dir) is True
    assert not embedded.status(data_dir).running
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert embedded.stop(data_dir) is False

    uri = embedded.start(data_dir)
    assert select_one(uri) == 1
    assert embedded.status(data_dir).pid != pid


def start_in_processes(data_dir: Path, count: int) -> list[str]:
    """Launch `count` processes together, each calling embedded.start(); all are waited for
    before anything is asserted, so no server is left starting behind a failed test."""
    code = f"from ingestion_pipeline.db import embedded; print(embedded.start({str(data_dir)!r}))"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    return [out.strip().splitlines()[-1] for out, _ in outputs]


def test_two_processes_starting_at_once_share_one_server(data_dir):
    first, second = start_in_processes(data_dir, 2)

    assert first == second
    assert select_one(first) == 1
    state = embedded.status(data_dir)
    assert state.running
    assert postmasters(embedded.pgdata_path(data_dir)) == [state.pid]


def test_two_processes_restarting_a_stopped_server_share_one_server(data_dir):
    embedded.start(data_dir)
    embedded.stop(data_dir)

    first, second = start_in_processes(data_dir, 2)

    assert first == second
    assert select_one(first) == 1
    assert postmasters(embedded.pgdata_path(data_dir)) == [embedded.status(data_dir).pid]


def test_server_outlives_the_process_that_started_it(data_dir):
    [uri] = start_in_processes(data_dir, 1)

    assert embedded.status(data_dir).running
    assert select_one(uri) == 1


def test_status_while_the_server_is_still_starting_does_not_crash(data_dir):
    embedded.start(data_dir)
    state = embedded.status(data_dir)
    pid_file = state.pgdata / "postmaster.pid"
    embedded.stop(data_dir)
    # The first seven lines, as a starting postmaster writes them before its status line.
    lines = [str(os.getpid()), str(state.pgdata), "1796000000", "5432", "", "", "  2203905    622622"]
    pid_file.write_text("\n".join(lines) + "\n")
    try:
        assert not embedded.status(data_dir).running
    finally:
        pid_file.unlink()


def test_start_recovers_from_a_half_written_pid_file_left_by_a_crash(data_dir):
    embedded.start(data_dir)
    pgdata = embedded.status(data_dir).pgdata
    embedded.stop(data_dir)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    (pgdata / "postmaster.pid").write_text(f"{dead.stdout.strip()}\n{pgdata}\n")

    uri = embedded.start(data_dir)
    assert select_one(uri) == 1


@pytest.mark.parametrize("status_line", ["ready", ""])  # complete, and half-written (no status yet)
def test_leftover_pid_file_naming_an_unrelated_live_process_is_stale(data_dir, status_line):
    """A crash left postmaster.pid; its pid now belongs to another process (here a `sleep`).
    Not running: status says so, stop signals nothing, start starts a real server."""
    embedded.start(data_dir)
    pgdata = embedded.status(data_dir).pgdata
    embedded.stop(data_dir)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        lines = [str(sleeper.pid), str(pgdata), "1796000000", "5432", str(pgdata), "", "  2203905    622622"]
        if status_line:
            lines.append(status_line)
        (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")

        assert not embedded.status(data_dir).running
        assert embedded.stop(data_dir) is False
        assert sleeper.poll() is None  # never signalled

        uri = embedded.start(data_dir)
        assert select_one(uri) == 1
        state = embedded.status(data_dir)
        assert state.running and state.pid != sleeper.pid
        assert postmasters(pgdata) == [state.pid]
        assert embedded.stop(data_dir) is True
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
