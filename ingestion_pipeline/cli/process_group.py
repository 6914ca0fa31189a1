"""Run a command tree (`dagster dev`: webserver, daemon, code servers, runs) so that
stopping us stops all of it.

The command leads a new process group, so a terminal's Ctrl-C reaches us only. On SIGINT,
SIGTERM or SIGHUP (sent to our pid, as `kill` and service managers do) or when the leader
exits by itself, we stop the group: SIGINT to the leader first (`dagster dev` then shuts
its webserver and daemon down, which stop their code servers, and exits 0), SIGTERM to
every process left after a grace period of 8 s, then SIGKILL 1 s later. We return only
when no process of the group is left, and `ingest ui` exits within ten seconds of the
request (issue: "ingest ui stops within 10 s of SIGINT or SIGTERM"): `dagster dev` once took
half a minute after SIGINT (its daemon finishing sensor ticks), and a stopped UI is expected
to be gone in seconds.

Most of the ten seconds are the leader's grace. A clean stop of `dg dev` took 3.5 s on idle
cores, 4 to 4.5 s with both cores busy and up to 7.8 s with them oversubscribed threefold:
its daemon alone took 3 s in CI, and after "Dagster services shut down" the interpreter's
teardown of all that Dagster imported takes 2 s or more. The former 4 s grace cut such stops
short: SIGTERM hit the leader and `ingest ui` exited 143. Our exit status is the leader's, so
a stop it finishes by itself is 0 and an escalation shows (143 or 137: SIGTERM or SIGKILL
ended the leader). Dagster keeps its runs and ticks in PostgreSQL, so a daemon stopped
mid-tick loses nothing that its next start does not redo.
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

STOP_SECONDS = 10.0  # the documented bound, from the request to our exit
# Escalation needs little of it: Dagster's processes take SIGTERM as a second Ctrl-C and the
# leader, once in its teardown, dies of it; SIGKILL leaves only the kernel's work. The waits
# are upper bounds: each step ends as soon as the group is empty.
TERM_SECONDS = 1.0
KILL_SECONDS = 0.5
# Our own exit after the group is gone (the last scans, the interpreter's teardown): 0.3 s
# on loaded cores.
EXIT_SECONDS = 0.5
# The rest (8 s) is the leader's, to stop cleanly after SIGINT.
GRACE_SECONDS = STOP_SECONDS - TERM_SECONDS - KILL_SECONDS - EXIT_SECONDS


def run_process_group(
    command: list[str], *, env: dict[str, str], cwd: str | Path | None, grace_seconds: float = GRACE_SECONDS
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
    # SIGINT to the leader, then SIGTERM, then SIGKILL to the group: with the default grace
    # the waits and our exit fit in STOP_SECONDS (_wait_empty does not overrun a wait).
    steps = ((signal.SIGINT, grace_seconds), (signal.SIGTERM, TERM_SECONDS), (signal.SIGKILL, KILL_SECONDS))
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
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(0.1, remaining))


def _signal(send: Callable[[int, int], None], pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send(pid, signum)
