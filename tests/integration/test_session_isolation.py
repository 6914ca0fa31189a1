"""Concurrent pytest sessions on one machine keep their own temporary folders and embedded
servers (tests/session_temp.py). Each session here is a real pytest process running
holding_session_case.py, which starts the suite's embedded server and holds it until its
barrier file appears: the order of events is set by files, never by sleeps. Their temproot
(PYTEST_DEBUG_TEMPROOT) is this test's own, so nothing here touches other runs' folders."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.session_temp import SESSION_PREFIX

REPO = Path(__file__).resolve().parents[2]
CASE = "tests/integration/holding_session_case.py"
GIVE_UP_SECONDS = 90  # only against a hung session: each is ready within seconds


@dataclass
class Session:
    process: subprocess.Popen
    ready: Path
    barrier: Path
    log: Path

    def output(self) -> str:
        return self.log.read_text()

    def data_dir(self) -> Path:
        """Once its server is up: the data directory it reports."""
        deadline = time.monotonic() + GIVE_UP_SECONDS
        while not self.ready.exists():
            assert self.process.poll() is None, f"the session ended before its server was up:\n{self.output()}"
            assert time.monotonic() < deadline, f"no server after {GIVE_UP_SECONDS} s:\n{self.output()}"
            time.sleep(0.05)
        return Path(self.ready.read_text())

    def release(self) -> int:
        self.barrier.touch()
        return self.process.wait(timeout=GIVE_UP_SECONDS)


def start_session(folder: Path, name: str, temproot: Path, *args: str) -> Session:
    ready, barrier, log_path = folder / f"{name}.ready", folder / f"{name}.go", folder / f"{name}.log"
    # Nothing of the outer session leaks in: its xdist worker, its addopts, a second server.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "TEST_DATABASE_URL"}
    env |= {"PYTEST_DEBUG_TEMPROOT": str(temproot), "HOLD_READY": str(ready), "HOLD_BARRIER": str(barrier)}
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", CASE, "-q", "-p", "no:cacheprovider", *args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return Session(process, ready, barrier, log_path)


def stop_all(*sessions: Session) -> None:
    """Teardown after a failure: no session outlives the test (each stops its server as it ends)."""
    for session in sessions:
        session.barrier.touch()
    for session in sessions:
        try:
            session.process.wait(timeout=GIVE_UP_SECONDS)
        except subprocess.TimeoutExpired:
            session.process.kill()
            session.process.wait()


def test_two_sessions_at_once_keep_their_own_servers_and_folders(tmp_path):
    temproot = tmp_path / "temproot"
    temproot.mkdir()
    first = start_session(tmp_path, "first", temproot)
    second = None
    try:
        first_data = first.data_dir()
        # The second session starts (and prunes ended sessions' folders) while the first holds its server.
        second = start_session(tmp_path, "second", temproot)
        second_data = second.data_dir()
        assert first_data != second_data
        assert (first_data / "PG_VERSION").is_file()

        # The first ends (and removes its own folder) while the second holds its server.
        assert first.release() == 0, first.output()
        assert (second_data / "PG_VERSION").is_file()
        assert second.release() == 0, second.output()
    finally:
        stop_all(first, *([second] if second else []))

    sessions_root = first_data.relative_to(temproot).parts[0]
    assert sessions_root.startswith("ingest-pytest-of-"), first_data
    assert second_data.relative_to(temproot).parts[0] == sessions_root
    # Neither used pytest's shared numbered folders; each passed and removed its own folder.
    assert sorted(p.name for p in temproot.iterdir()) == [sessions_root]
    assert list((temproot / sessions_root).glob(f"{SESSION_PREFIX}*")) == []


def test_a_basetemp_in_use_is_refused_not_emptied(tmp_path):
    """pytest empties a given --basetemp at start: a second session given the one a running
    session uses is refused, and the running one's server keeps its data."""
    temproot = tmp_path / "temproot"
    temproot.mkdir()
    basetemp = f"--basetemp={tmp_path / 'shared'}"
    first = start_session(tmp_path, "first", temproot, basetemp)
    try:
        first_data = first.data_dir()
        assert first_data.is_relative_to(tmp_path / "shared")
        second = start_session(tmp_path, "second", temproot, basetemp)
        assert second.process.wait(timeout=GIVE_UP_SECONDS) == pytest.ExitCode.USAGE_ERROR
        assert "is in use by another pytest session" in second.output()
        assert (first_data / "PG_VERSION").is_file()
        assert first.release() == 0, first.output()
    finally:
        stop_all(first)
