"""`ingest ui` runs Dagster through run_process_group: a signal to our pid stops the whole
tree, escalating past processes that ignore the polite signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

# A leader and a child that both ignore SIGINT and SIGTERM (a hung shutdown); each writes
# its pid to the ready folder once its handlers are set.
STUBBORN_TREE = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready = sys.argv[1]
    if len(sys.argv) == 2:
        subprocess.Popen([sys.executable, __file__, ready, "child"])
    open(os.path.join(ready, str(os.getpid())), "w").close()
    time.sleep(600)
""")

RUNNER = textwrap.dedent("""
    import sys
    from ingestion_pipeline.cli.process_group import run_process_group
    code = run_process_group([sys.executable, sys.argv[1], sys.argv[2]], env=None, cwd=None, grace_seconds=1)
    print(code)
""")


def wait_for_files(folder: Path, count: int, timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(list(folder.iterdir())) < count:
        assert time.monotonic() < deadline, "the process tree did not start"
        time.sleep(0.05)
    return [int(path.name) for path in folder.iterdir()]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_runner_stops_a_tree_that_ignores_polite_signals(tmp_path, signum):
    (tmp_path / "tree.py").write_text(STUBBORN_TREE)
    ready = tmp_path / "ready"
    ready.mkdir()
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(tmp_path / "tree.py"), str(ready)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tree = wait_for_files(ready, 2)

    runner.send_signal(signum)
    out, _ = runner.communicate(timeout=60)

    assert out.strip() == str(128 + signal.SIGKILL)  # the leader ignored SIGINT and SIGTERM
    assert [pid for pid in tree if alive(pid)] == []


def test_when_the_leader_exits_by_itself_its_children_are_stopped(tmp_path):
    (tmp_path / "tree.py").write_text(
        STUBBORN_TREE.replace("time.sleep(600)", "time.sleep(600 if len(sys.argv) > 2 else 0)")
    )
    ready = tmp_path / "ready"
    ready.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(tmp_path / "tree.py"), str(ready)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "0"
    tree = wait_for_files(ready, 2)
    assert [pid for pid in tree if alive(pid)] == []
