"""`ingest ui` runs Dagster through run_process_group: a signal to our pid stops the whole
tree within ten seconds, escalating past processes that ignore the polite signals, but not
cutting short a leader that stops by itself within its grace."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from ingestion_pipeline.cli.process_group import GRACE_SECONDS, STOP_SECONDS

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

# A leader like `dagster dev`: on SIGINT it shuts down cleanly (stops its child, exits 0), but
# only after argv[2] seconds; SIGTERM or SIGKILL would end it with their signal instead.
SLOW_LEADER = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    ready, seconds = sys.argv[1], float(sys.argv[2])
    interrupted = []
    signal.signal(signal.SIGINT, lambda *_: interrupted.append(time.monotonic()))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    for pid in (os.getpid(), child.pid):
        open(os.path.join(ready, str(pid)), "w").close()
    while not interrupted:
        time.sleep(0.05)
    time.sleep(max(0.0, interrupted[0] + seconds - time.monotonic()))
    child.terminate()
    child.wait()
""")

# A leader and a child that each note which signal reached them (a file named after their pid
# and the signal) and exit 0 on SIGINT, as Dagster's processes stop on Ctrl-C.
NOTING_TREE = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    ready = sys.argv[1]
    def note(signum, frame):
        open(os.path.join(ready, f"{os.getpid()}.{signal.Signals(signum).name}"), "w").close()
        sys.exit(0)
    signal.signal(signal.SIGINT, note)
    signal.signal(signal.SIGTERM, note)
    if len(sys.argv) == 2:
        subprocess.Popen([sys.executable, __file__, ready, "child"])
    open(os.path.join(ready, str(os.getpid())), "w").close()
    time.sleep(600)
""")

# A leader and a child with Python's own Ctrl-C handling only (KeyboardInterrupt), each exiting
# 0 on it, as `dg dev` and its services do.
DEFAULT_TREE = textwrap.dedent("""
    import os, subprocess, sys, time
    ready = sys.argv[1]
    try:
        child = subprocess.Popen([sys.executable, __file__, ready, "child"]) if len(sys.argv) == 2 else None
        open(os.path.join(ready, str(os.getpid())), "w").close()
        time.sleep(600)
    except KeyboardInterrupt:
        if child:
            child.wait()
        sys.exit(0)
""")

# argv: the grace period, then the leader's script and its arguments. The hook notes the group's
# id and how many of its processes were alive when it was called (before the interrupt), and
# fails with HOOK_RAISES set.
RUNNER = textwrap.dedent("""
    import os, sys
    from ingestion_pipeline.cli.process_group import group_members, run_process_group
    def before_interrupt(pgid):
        print(f"hook {pgid} {len(group_members(pgid))}", flush=True)
        if os.environ.get("HOOK_RAISES"):
            raise RuntimeError("the database is gone")
    code = run_process_group(
        [sys.executable, *sys.argv[2:]], env=None, cwd=None, grace_seconds=float(sys.argv[1]),
        before_interrupt=before_interrupt,
    )
    print(code)
""")


def status(out: str) -> str:
    """The runner's last line: run_process_group's result."""
    return out.strip().splitlines()[-1]


FORMER_GRACE_SECONDS = 4.0  # cut a clean `dagster dev` shutdown short on loaded CI cores


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


def start_runner(
    tmp_path: Path, script: str, grace: float, *leader_args: str, sigint_ignored: bool = False
) -> tuple[subprocess.Popen[str], list[int]]:
    """The runner (a process of its own, as `ingest ui` is) and the pids of the tree, once started."""
    (tmp_path / "tree.py").write_text(script)
    ready = tmp_path / "ready"
    ready.mkdir()
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(grace), str(tmp_path / "tree.py"), str(ready), *leader_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # as `nohup … &` or a script's background job starts a command
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
    )
    return runner, wait_for_files(ready, 2)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_runner_stops_a_tree_that_ignores_polite_signals(tmp_path, signum):
    runner, tree = start_runner(tmp_path, STUBBORN_TREE, 1)

    runner.send_signal(signum)
    out, _ = runner.communicate(timeout=60)

    assert status(out) == str(128 + signal.SIGKILL)  # the leader ignored SIGINT and SIGTERM
    assert [pid for pid in tree if alive(pid)] == []


def test_when_the_leader_exits_by_itself_its_children_are_stopped(tmp_path):
    (tmp_path / "tree.py").write_text(
        STUBBORN_TREE.replace("time.sleep(600)", "time.sleep(600 if len(sys.argv) > 2 else 0)")
    )
    ready = tmp_path / "ready"
    ready.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "1", str(tmp_path / "tree.py"), str(ready)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status(done.stdout) == "0"
    tree = wait_for_files(ready, 2)
    assert [pid for pid in tree if alive(pid)] == []


def test_with_the_default_grace_a_tree_that_ignores_polite_signals_is_gone_within_the_bound(tmp_path):
    runner, tree = start_runner(tmp_path, STUBBORN_TREE, GRACE_SECONDS)

    started = time.monotonic()
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=60)
    elapsed = time.monotonic() - started

    assert status(out) == str(128 + signal.SIGKILL)
    assert [pid for pid in tree if alive(pid)] == []
    assert GRACE_SECONDS <= elapsed < STOP_SECONDS, elapsed  # it waited the grace out, and no longer than the bound


def test_a_clean_shutdown_slower_than_the_former_grace_is_not_escalated(tmp_path):
    # slower than the 4 s that cut `dagster dev` short, with 2 s to spare before the grace ends
    seconds = GRACE_SECONDS - 2
    assert seconds > FORMER_GRACE_SECONDS
    runner, tree = start_runner(tmp_path, SLOW_LEADER, GRACE_SECONDS, str(seconds))

    started = time.monotonic()
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=60)
    elapsed = time.monotonic() - started

    assert status(out) == "0"  # the leader exited by itself: no SIGTERM (143), no SIGKILL (137)
    assert [pid for pid in tree if alive(pid)] == []
    assert seconds <= elapsed < GRACE_SECONDS, elapsed


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_hook_runs_first_then_sigint_reaches_every_process_of_the_group(tmp_path, signum):
    """A terminal's Ctrl-C interrupts every process of `dg dev` at once, and so do we: each
    starts its own shutdown (a run worker ends its run) instead of waiting its turn."""
    runner, tree = start_runner(tmp_path, NOTING_TREE, GRACE_SECONDS)

    runner.send_signal(signum)
    out, _ = runner.communicate(timeout=60)

    assert status(out) == "0"  # both stopped by themselves: nothing escalated
    [hook] = [line for line in out.splitlines() if line.startswith("hook ")]
    _, pgid, alive_then = hook.split()
    assert int(pgid) in tree and alive_then == "2"  # called with the group's id, before anything was stopped
    assert sorted(path.name for path in (tmp_path / "ready").glob("*.*")) == sorted(f"{pid}.SIGINT" for pid in tree)
    assert "every process stopped" in out


def test_a_hook_that_fails_does_not_keep_the_group_from_stopping(tmp_path, monkeypatch):
    monkeypatch.setenv("HOOK_RAISES", "1")
    runner, tree = start_runner(tmp_path, NOTING_TREE, GRACE_SECONDS)

    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)

    assert status(out) == "0"
    assert "could not prepare the stop (the database is gone); stopping anyway" in err
    assert [pid for pid in tree if alive(pid)] == []


def test_started_with_sigint_ignored_the_group_still_stops_on_our_sigint(tmp_path):
    """An ignored signal stays ignored across exec, a caught one does not: the runner, started
    the way `nohup ingest ui &` starts it, must not hand that on to the group."""
    runner, tree = start_runner(tmp_path, DEFAULT_TREE, GRACE_SECONDS, sigint_ignored=True)

    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)

    assert status(out) == "0", err  # 143: the tree ignored SIGINT and the stop was escalated
    assert [pid for pid in tree if alive(pid)] == []
