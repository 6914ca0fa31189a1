"""Run a command tree (`dagster dev`: webserver, daemon, code servers, runs) so that
stopping us stops all of it.

The command leads a new process group, so a terminal's Ctrl-C reaches us only. On SIGINT,
SIGTERM or SIGHUP (sent to our pid, as `kill` and service managers do) or when the leader
exits by itself, we stop the group: SIGINT to the leader first (`dagster dev` then shuts
its webserver and daemon down, which stop their code servers), SIGTERM to every process
left after the grace period, then SIGKILL. We return only when no process of the group is
left, within about ten seconds: `dagster dev` alone took half a minute after SIGINT (its
daemon finishing sensor ticks), and a stopped UI is expected to be gone in a few seconds.
Dagster keeps its runs and ticks in PostgreSQL, so a daemon stopped mid-tick loses nothing
that its next start does not redo.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_process_group(
    command: list[str], *, env: dict[str, str], cwd: str | Path | None, grace_seconds: float = 4.0
) -> int:
    # `command` is an argument list built by the caller (`ingest ui`: our own `dg dev`), never a shell string.
    proc = subprocess.Popen(command, env=env, cwd=cwd, start_new_session=True)  # noqa: S603
    requested = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: requested.set()) for signum in FORWARDED}
    try:
        while proc.poll() is None and not requested.wait(0.5):
            pass
    finally:
        stop_group(proc, grace_seconds)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    code = proc.wait()
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


def stop_group(leader: subprocess.Popen[bytes], grace_seconds: float) -> None:
    pgid = leader.pid
    # SIGINT to the leader, then SIGTERM, then SIGKILL to the group: at most about 9 s in all.
    steps = ((signal.SIGINT, grace_seconds), (signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0))
    for number, (signum, wait) in enumerate(steps):
        if _wait_empty(leader, 0.0):
            return
        send = os.kill if number == 0 and leader.poll() is None else os.killpg
        _signal(send, pgid, signum)
        if _wait_empty(leader, wait):
            return


def group_members(pgid: int) -> list[psutil.Process]:
    """Live processes of the group (zombies excluded: they are already gone, only not yet
    reaped, and a container's PID 1 may never reap them)."""
    members = []
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def _wait_empty(leader: subprocess.Popen[bytes], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        leader.poll()  # reap the leader: we are its parent
        if not group_members(leader.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _signal(send: Callable[[int, int], None], pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send(pid, signum)
