"""Each pytest session's temporary folders are its own (a plugin: tests/conftest.py loads it).

Without `--basetemp`, pytest puts a session's folders in a numbered `pytest-N` under
`/tmp/pytest-of-$USER/`, shared by every session on the machine, keeps the newest three and
deletes older ones; the suite's embedded servers keep their data there. Sessions that run at
once (two checkouts, `make test` beside a developer's run, a nested pytest) then depend on
each other's bookkeeping, and a server's data directory vanished under a running suite. So
a session given no `--basetemp` gets one of its own, outside pytest's numbered folders:
`<temproot>/ingest-pytest-of-$USER/session-XXXX/tmp`, where `session-XXXX` holds a lock
(flock) for as long as the session runs. xdist workers take their folders inside their
controller's, as pytest-xdist hands them out.

- A session that passes (or runs nothing) removes its folder at the end; one that failed or
  was interrupted keeps it (the summary says where) for inspection.
- A starting session removes the folders of sessions that are over (their lock is free: the
  kernel drops a flock when its process exits, however it exits), the newest three of them
  kept, after stopping any embedded server a killed session left running in one. A folder
  whose lock is held is never touched.
- A session given `--basetemp` holds a lock beside it (`.<name>.pytest-lock`): pytest empties
  that folder at start, so a second session given the same one while the first runs is refused
  instead of deleting the first one's servers.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ingestion_pipeline.db import embedded
from ingestion_pipeline.errors import DatabaseUnavailable

KEEP_FAILED = 3
# pytest's exit statuses after which a session's folders are worth a look: tests failed, the
# run was interrupted, pytest itself failed
_KEPT_AFTER = {pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR}
SESSION_PREFIX = "session-"
LOCK_NAME = ".session.lock"

_LOCK_FD = pytest.StashKey[int]()
_OWN_FOLDER = pytest.StashKey[Path]()
_EXIT_STATUS = pytest.StashKey[int]()


def sessions_root() -> Path:
    """Where sessions' folders go: beside pytest's own `pytest-of-$USER`, never inside it
    (pytest's cleanup deletes any unlocked `pytest-*` entry there)."""
    temproot = Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir())
    root = temproot / f"ingest-pytest-of-{os.getuid()}"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


def try_lock(path: Path, create: bool = False) -> int | None:
    """An open descriptor holding an exclusive flock on `path`, or None when another holds it
    (or, without `create`, when the file is gone: its folder is being removed)."""
    try:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def new_session_folder(root: Path) -> tuple[Path, int]:
    """A folder of this session's, locked before it gets the name that pruning looks at (a
    pruner could otherwise take the lock of a folder that is only being made)."""
    staging = Path(tempfile.mkdtemp(prefix=".new-", dir=root))
    fd = try_lock(staging / LOCK_NAME, create=True)
    assert fd is not None, "a lock in a folder made just now is free"
    folder = root / f"{SESSION_PREFIX}{staging.name.removeprefix('.new-')}"
    staging.rename(folder)  # the flock is on the file, which the rename keeps
    return folder, fd


def prune(root: Path, keep: int = KEEP_FAILED) -> list[Path]:
    """Remove the folders of sessions that are over, but the newest `keep`: the removed ones."""
    over: list[tuple[float, Path, int]] = []
    for folder in root.glob(f"{SESSION_PREFIX}*"):
        fd = try_lock(folder / LOCK_NAME)
        if fd is not None:
            over.append((folder.stat().st_mtime, folder, fd))
    over.sort(key=lambda entry: entry[0], reverse=True)
    removed = []
    for index, (_, folder, fd) in enumerate(over):
        try:
            if index >= keep and _stop_servers_in(folder):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        finally:
            os.close(fd)
    return removed


def _stop_servers_in(folder: Path) -> bool:
    """Stop the embedded servers a killed session left running in `folder` (they are started
    to outlive their process); False when one would not stop, and the folder stays."""
    for pid_file in folder.rglob("pgdata/postmaster.pid"):
        try:
            embedded.stop(pid_file.parent.parent)
        except (DatabaseUnavailable, OSError, RuntimeError):
            return False
    return True


def _hold_given(basetemp: Path) -> int:
    basetemp = basetemp.expanduser().resolve()
    basetemp.parent.mkdir(parents=True, exist_ok=True)
    fd = try_lock(basetemp.parent / f".{basetemp.name}.pytest-lock", create=True)
    if fd is None:
        raise pytest.UsageError(
            f"--basetemp={basetemp} is in use by another pytest session, and pytest empties it at start: "
            "give this run its own (or none: each session then gets one of its own)"
        )
    return fd


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads the option
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: its folder is inside its controller's
        return
    if config.option.basetemp:
        config.stash[_LOCK_FD] = _hold_given(Path(config.option.basetemp))
        return
    root = sessions_root()
    prune(root)
    folder, fd = new_session_folder(root)
    config.stash[_LOCK_FD], config.stash[_OWN_FOLDER] = fd, folder
    config.option.basetemp = str(folder / "tmp")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    folder = config.stash.get(_OWN_FOLDER, None)
    if folder is not None and exitstatus in _KEPT_AFTER:
        terminalreporter.write_line(f"temporary folders kept for inspection: {folder}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the session fixtures' teardown (their servers are stopped): remove the folder of
    a session that passed, then let go of the lock."""
    folder = config.stash.get(_OWN_FOLDER, None)
    if folder is not None and config.stash.get(_EXIT_STATUS, pytest.ExitCode.INTERRUPTED) not in _KEPT_AFTER:
        shutil.rmtree(folder, ignore_errors=True)
    fd = config.stash.get(_LOCK_FD, None)
    if fd is not None:
        os.close(fd)
