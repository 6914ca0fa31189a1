"""How the parsing pool (worker/isolation.py) starts its children: the multiprocessing context
it gives pebble, whose children never run the caller's main module, and their fork server.

multiprocessing's "forkserver" and "spawn" children run the parent's main module again, as
`__mp_main__`, before they start: the preparation data each child is sent names it
(`init_main_from_path`, `init_main_from_name`), so that what it defines can be unpickled
there. A script without an `if __name__ == "__main__":` guard then ran its top level again
in every parsing child: it enqueued and drained once per child, and the child's own pool
refused to start ("An attempt has been made to start a new process before the current process
has finished its bootstrapping phase"), a pool fault the worker backed off from and met again,
for ever (issue 61). A library cannot ask that guard of its callers, nor know what their main
module is (a script, `python -c`, a notebook's kernel, a Dagster op, an interactive shell):
so a child here is told nothing of it. It runs what the pool sends it, functions of this
package (or of a test module) that it imports by name; an object that pickles by reference
to `__main__` (an embedder class defined in a script) cannot go to a child, and
`isolation.can_run_in_child` keeps such an embedder in the job's thread.

The fork server is this package's, not multiprocessing's process-wide one: it preloads the
parsers (never `__main__`) whoever started the process-wide one first, and a caller's own
forkserver pools keep their settings. One serves every pool of the process (`parse_context`)
and exits with it.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Sequence
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.context import ForkServerContext, ForkServerProcess, set_spawning_popen
from multiprocessing.process import BaseProcess
from typing import Any

# The preparation data's keys that make a child run the parent's main module.
MAIN_MODULE_KEYS = ("init_main_from_path", "init_main_from_name")


class ChildProcess(ForkServerProcess):
    """A parsing child, started by `fork_server` (set by ParseContext.Process). The class is
    pickled by name to the child: it must stay importable at module level."""

    fork_server: forkserver.ForkServer | None = None

    @staticmethod
    def _Popen(process_obj: BaseProcess) -> _StartedChild:  # multiprocessing's name
        return _StartedChild(process_obj)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("fork_server", None)  # the parent's: it holds a lock and never travels
        return state


class _StartedChild(popen_forkserver.Popen):
    """multiprocessing's forkserver start of one process, through the process's own fork
    server and without its main module: the fork server forks a child and hands it two pipes;
    the parent writes the preparation data and the pickled process object on one and reads the
    child's pid (and later its exit status) on the other."""

    def _launch(self, process_obj: BaseProcess) -> None:
        server = getattr(process_obj, "fork_server", None)
        if server is None:
            raise RuntimeError("a parsing child needs its pool's fork server (ParseContext.Process)")
        preparation = spawn.get_preparation_data(process_obj.name)
        for key in MAIN_MODULE_KEYS:
            preparation.pop(key, None)
        sent = io.BytesIO()
        set_spawning_popen(self)  # the pipes and locks in process_obj pickle for this child only
        try:
            reduction.dump(preparation, sent)
            reduction.dump(process_obj, sent)
        finally:
            set_spawning_popen(None)
        fds: list[int] = self._fds  # type: ignore[attr-defined]  # duplicate_for_child's, set by __init__
        self.sentinel, data_w = server.connect_to_new_process(fds)
        # The child watches the other end of this pipe to learn that its parent is gone:
        # a copy stays open here for as long as the process object lives.
        kept = os.dup(data_w)
        self.finalizer = util.Finalize(self, _close_fds, (kept, self.sentinel))
        with open(data_w, "wb", closefd=True) as pipe:
            pipe.write(sent.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


def _close_fds(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


class ParseContext(ForkServerContext):
    """A forkserver context whose processes start from a fork server of its own that imports
    `preload` (module names; never `__main__`) before it forks any child."""

    def __init__(self, preload: Sequence[str]) -> None:
        if "__main__" in preload:
            raise ValueError("a parsing child never imports the caller's main module")
        self.fork_server = forkserver.ForkServer()
        self.fork_server.set_forkserver_preload(list(preload))

    def Process(self, *args: Any, **kwargs: Any) -> ChildProcess:  # type: ignore[override]  # pebble calls it
        process = ChildProcess(*args, **kwargs)
        process.fork_server = self.fork_server
        return process


_CONTEXTS: dict[tuple[int, tuple[str, ...]], ParseContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def parse_context(preload: Sequence[str]) -> ParseContext:
    """This process's context for `preload`. Its fork server starts with the first child and
    serves every pool after it (the next `Index.work`, the next Dagster run in this process),
    so the parsers are imported once per process, not once per drain; it exits when this
    process does (the end of its 'alive' pipe, once the children are gone). Keyed by pid
    too: a forked copy of this process has no fork server of its own yet."""
    key = (os.getpid(), tuple(preload))
    with _CONTEXTS_LOCK:
        if key not in _CONTEXTS:
            _CONTEXTS[key] = ParseContext(preload)
        return _CONTEXTS[key]
