"""Which parsing child runs a task, as the parent sees it, whatever state the pool is in.

pebble enforces a task's time limit from its own manager threads, and only while it can
take the pool's channel lock: with a manager thread dead, or a child stopped while it held
that lock, a hung parse was never stopped and the heartbeat kept renewing its job's lease
(issue 44). So each task tells the parent, through a file named for the task, which process
runs it: the child writes its pid when the task begins and removes the file when the task
returns. While the file exists, that process (and its process group: each child leads its
own, so a converter it started goes with it) is inside this task and nowhere else, and the
parent may kill it without touching another job's parse.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_task(pid_path: str, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What a child runs for each task (module level: children import it by name)."""
    path = Path(pid_path)
    path.write_text(str(os.getpid()))
    try:
        return target(*args, **kwargs)
    finally:
        path.unlink(missing_ok=True)


def lead_own_process_group() -> None:
    """In each child, once: lead a process group of its own, so that killing the group ends
    the child and whatever it started (Tesseract, a converter), and nothing else."""
    # Already a leader, or not allowed: the deadline then cannot kill it (kill_task_child
    # kills group leaders only), and pebble's own time limit is what is left.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)


class TaskFiles:
    """The folder of a pool's task files (one per task in flight)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ingest-parse-tasks-"))

    def new(self) -> Path:
        return self.folder / uuid.uuid4().hex

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def running_pid(path: Path) -> int | None:
    """The pid of the child inside the task, or None (not started yet, or returned)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return int(text) if text.strip().isdigit() else None  # a half-written file: not yet


def kill_task_child(path: Path) -> int | None:
    """SIGKILL the process group of the child inside the task (SIGKILL ends a stopped
    process too); the pid killed, or None when no child is inside it."""
    pid = running_pid(path)
    if pid is None:
        return None
    try:
        # Only a group leader, as every child is (lead_own_process_group): a stale file whose
        # pid the kernel gave to some unrelated process (which leads no group) is left alone.
        if os.getpgid(pid) != pid:
            return None
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # it died meanwhile
        return None
    finally:
        path.unlink(missing_ok=True)
    return pid
