"""Imported only by the parsing pool's fork server (worker/isolation.py preloads it), never
by the worker: what that process sets up for every child it forks.

A child that the pool starts as the pool ends (pebble replacing a child that finished its
tasks just as the worker stops, or a broken pool being replaced) can find the pool's
semaphores gone: multiprocessing unlinks a lock's named semaphore when the last reference to
it goes, and when the worker exits. The child then fails before it runs anything
(FileNotFoundError, rebuilding the semaphore it was sent), and the fork server prints that
as a traceback on the worker's stderr: a scary end to a clean `ingest work` stop (a
fresh-clone test run met one in tests/faults/test_final_attempt_and_restart.py). Such a child has no pool to
serve; it exits with status 1, quietly. Any other failure of a child's start prints as before.
"""

from __future__ import annotations

import sys
from types import TracebackType

_PREVIOUS_HOOK = sys.excepthook


def quiet_when_the_pool_is_gone(
    kind: type[BaseException], value: BaseException, traceback: TracebackType | None
) -> None:
    if isinstance(value, FileNotFoundError) and raised_rebuilding_a_semaphore(traceback):
        return
    _PREVIOUS_HOOK(kind, value, traceback)


def raised_rebuilding_a_semaphore(traceback: TracebackType | None) -> bool:
    """The exception came out of SemLock.__setstate__ (multiprocessing/synchronize.py): a
    child unpickling a lock whose semaphore no longer exists."""
    last = None
    while traceback is not None:
        last, traceback = traceback, traceback.tb_next
    if last is None:
        return False
    code = last.tb_frame.f_code
    return code.co_name == "__setstate__" and code.co_filename.replace("\\", "/").endswith(
        "multiprocessing/synchronize.py"
    )


sys.excepthook = quiet_when_the_pool_is_gone
