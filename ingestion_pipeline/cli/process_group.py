"""Run a command tree (`dg dev`: webserver, daemon, code servers, run workers) so that
stopping us stops all of it.

The command leads a new process group, so a terminal's Ctrl-C reaches us only. On SIGINT,
SIGTERM or SIGHUP (sent to our pid, as `kill` and service managers do) or when the leader
exits by itself, we stop the group: an optional hook first (`ingest ui` marks its runs in
flight canceling), then SIGINT to every process of the group, which is what Ctrl-C in a
terminal running `dg dev` does, so each process starts its own clean shutdown at once; then,
only if the group overruns its grace, SIGTERM and SIGKILL. We return only when no process of
the group is left, within ten seconds of the request (issue 48: "`ingest ui` stops in ≤ 10 s
every time without SIGKILL").

SIGINT to the leader alone (until issue 48) serialised the stop: `dg dev` asked its
webserver and daemon to stop, then its code servers, and a code server waits for the runs
it launched to finish, so a run in flight held the whole stop until the escalation killed
it (9.7 s and exit 137 with a queued janitor run on loaded cores). Interrupted together, the
processes stop in parallel and a run worker ends its run at once (canceled: ui_runs.py).

Our exit status is the leader's: a stop it finishes by itself is 0, and an escalation shows
(143 or 137: SIGTERM or SIGKILL ended the leader). Dagster keeps its runs and ticks in
PostgreSQL, so a daemon stopped mid-tick loses nothing that its next start does not redo.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
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
TERM_SECONDS = 0.5
KILL_SECONDS = 0.3
# Our own work once the group is gone: `ingest ui` marks its interrupted runs canceled (a
# few statements) and exits without the interpreter's teardown.
EXIT_SECONDS = 0.7
# The rest (8.5 s, the hook's time included) is the group's, to stop cleanly after SIGINT:
# 2.5 to 4 s on idle cores, 7.5 s and more on cores busy three times over, where every
# process of `dg dev` tears down at once (its code server last, after `dg dev` itself).
GRACE_SECONDS = STOP_SECONDS - TERM_SECONDS - KILL_SECONDS - EXIT_SECONDS


def run_process_group(
    command: list[str],
    *,
    env: dict[str, str] | None,
    cwd: str | Path | None,
    before_interrupt: Callable[[int], object] | None = None,
    grace_seconds: float = GRACE_SECONDS,
) -> int:
    """Run `command` until it exits or we are asked to stop; its exit status. `before_interrupt`
    is called with the group's id once, before the group is interrupted (if any of it is left)."""
    requested = threading.Event()
    requested_at: list[float] = []

    def request(*_: object) -> None:
        requested_at.append(time.monotonic())
        requested.set()

    # Our handlers go in before the command starts: a caught signal is reset to its default in
    # the child, but an ignored one stays ignored, and `nohup ingest ui &` (or any background
    # job of a script) starts us with SIGINT ignored: `dg dev` would then ignore our SIGINT,
    # and every stop would end in the escalation.
    previous = {signum: signal.signal(signum, request) for signum in FORWARDED}
    try:
        # `command` is an argument list built by the caller (`ingest ui`: our own `dg dev`), never a shell string.
        proc = subprocess.Popen(command, env=env, cwd=cwd, start_new_session=True)  # noqa: S603
        try:
            while proc.poll() is None and not requested.wait(0.5):
                pass
        finally:
            stop_group(proc, grace_seconds, before_interrupt)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    code = proc.wait()
    if requested_at:  # how much of the bound the processes took (bench/ui_stop.py reads it)
        seconds = time.monotonic() - requested_at[0]
        print(f"{Path(command[0]).name}: every process stopped {seconds:.1f} s after the signal", flush=True)
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


def stop_group(
    leader: subprocess.Popen[bytes], grace_seconds: float, before_interrupt: Callable[[int], object] | None = None
) -> None:
    pgid = leader.pid
    if _wait_empty(leader, 0.0):
        return
    # The grace runs from here: the hook's time comes out of it, so the bound holds.
    grace_ends = time.monotonic() + grace_seconds
    if before_interrupt is not None:
        try:
            before_interrupt(pgid)
        except Exception as error:  # noqa: BLE001 - stopping the group matters more than the hook
            print(f"could not prepare the stop ({error}); stopping anyway", file=sys.stderr, flush=True)
    steps = (
        (signal.SIGINT, grace_ends - time.monotonic()),
        (signal.SIGTERM, TERM_SECONDS),
        (signal.SIGKILL, KILL_SECONDS),
    )
    for signum, wait in steps:
        if signum != signal.SIGINT:  # an escalation: say what outlived the grace, so that it can be found
            left = ", ".join(describe(process) for process in group_members(pgid))
            print(f"still running: {left}; {signum.name} to them", file=sys.stderr, flush=True)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)
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


def describe(process: psutil.Process) -> str:
    """A process in a few words: its pid and what it runs (`python -m dagster_webserver`:
    dagster_webserver; a script: its name)."""
    try:
        argv = process.cmdline()
    except psutil.Error:
        return str(process.pid)
    words = argv[1:] if argv and Path(argv[0]).name.startswith("python") else argv
    if words[:1] == ["-m"]:
        words = words[1:]
    name = " ".join(Path(word).name for word in words[:2] if not word.startswith("-"))
    return f"{process.pid} ({name or '?'})"


def command_lines(pgid: int) -> list[list[str]]:
    """The argument lists of the group's live processes."""
    lines = []
    for process in group_members(pgid):
        with contextlib.suppress(psutil.Error):
            lines.append(process.cmdline())
    return lines


def group_empty(leader: subprocess.Popen[bytes]) -> bool:
    """No live process left in the leader's group. A signal 0 to the group answers in one
    system call; only when it finds processes but the leader is gone are they looked at one
    by one (a scan of every process on the machine: a tenth of a second or more on loaded
    cores), since they may be zombies that nobody reaps."""
    if leader.poll() is None:  # also reaps the leader: we are its parent
        return False
    try:
        os.killpg(leader.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return not group_members(leader.pid)


def _wait_empty(leader: subprocess.Popen[bytes], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if group_empty(leader):
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(0.1, remaining))
