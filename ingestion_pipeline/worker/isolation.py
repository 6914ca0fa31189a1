"""Parsing in child processes, with limits.

Parse, chunk and embed are pure Python: in the worker's threads they share one interpreter
lock (one core, whatever the concurrency), and a parser that hangs or allocates without
bound takes the job's lease (kept alive by the heartbeat thread) or the whole worker with
it. Here they run in a pool of child processes owned by the worker (pebble's ProcessPool):

- a task that runs longer than the parse timeout has its child killed and replaced, and
  the document fails: "parsing took longer than 120 s";
- each child's address space is capped (RLIMIT_AS): an allocation past it raises
  MemoryError in the child, and the document fails: "parsing needed more than 2 GiB";
- a task that outlives that limit because the pool cannot stop it (a manager thread gone,
  a child stopped while it held the pool's lock) has its child's process group killed
  from the parent, fails the same way, and the pool is replaced;
- a child that dies (a crash, the kernel's OOM killer), or a pool that breaks, is a fault
  of the worker: the jobs it was parsing are released (worker/job.py), the pool is
  rebuilt, and the worker backs off before claiming again;
- a child is replaced after a number of tasks, so no parser's leaks accumulate;
- children die with the worker (PR_SET_PDEATHSIG) and are stopped when it stops.

The worker's threads keep the leases, the database writes and the fenced RPCs. Children
are started by a fork server: never forked from the threaded worker itself.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import contextlib
import ctypes
import io
import logging
import os
import pickle
import resource
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pebble

from ingestion_pipeline.db.chunk_table import DEFAULT_CHUNK_TABLE, ChunkTable
from ingestion_pipeline.processing import (
    DEFAULT_OCR,
    Chunk,
    ChunkingOptions,
    Embedder,
    OcrOptions,
    ParsedDocument,
    ProcessingError,
    chunk_sections,
    embed_chunks,
    parse,
)
from ingestion_pipeline.processing.parse import PARSER_MODULES
from ingestion_pipeline.worker.artifacts import EncodedArtifacts, encode_artifacts
from ingestion_pipeline.worker.child_start import parse_context
from ingestion_pipeline.worker.child_tasks import (
    TaskFiles,
    kill_task_child,
    lead_own_process_group,
    run_task,
    running_pid,
)
from ingestion_pipeline.worker.errors import LeaseLost, WorkerFault

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25  # how often a waiting job thread looks at its lease
# pebble stops a task at its time limit (SIGTERM, 3 s, then SIGKILL); the parent steps in
# only after that: a parse still running then means pebble cannot stop it.
DEADLINE_GRACE_SECONDS = 5.0
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ParseLimits:
    processes: int
    timeout_seconds: float
    memory_bytes: int
    tasks_per_child: int
    # The worker's back-off after a fault of its pool, doubled with each fault in a row.
    fault_backoff_seconds: float = 1.0
    fault_backoff_max_seconds: float = 60.0


@dataclass(frozen=True)
class Processed:
    """A document processed in a child, and the stages' seconds as measured there. Either
    its rows, ready for COPY (`encoded`: the child embedded them, or there is nothing to
    embed), or the parsed document and its chunks, for the job's thread to embed."""

    seconds: dict[str, float]
    encoded: EncodedArtifacts | None = None
    document: ParsedDocument | None = None
    chunks: list[Chunk] | None = None


def process_document_in_child(
    content: bytes,
    source_name: str,
    max_bytes: int,
    chunking: ChunkingOptions,
    embedder: Embedder | None,
    *,
    embed_here: bool = True,
    table: ChunkTable = DEFAULT_CHUNK_TABLE,
    ocr: OcrOptions = DEFAULT_OCR,
) -> Processed:
    """What a child runs (module level: the fork server's children import it by name).
    `embed_here=False`: the job's thread embeds (an embedder that cannot be sent here)."""
    seconds = {}
    began = time.perf_counter()
    document = parse(content, source_name, max_bytes=max_bytes, ocr=ocr)
    seconds["parse"] = time.perf_counter() - began
    began = time.perf_counter()
    chunks = chunk_sections(document.sections, chunking)
    seconds["chunk"] = time.perf_counter() - began
    if not embed_here:
        return Processed(seconds, document=document, chunks=chunks)
    if embedder is not None:
        began = time.perf_counter()
        chunks = embed_chunks(chunks, embedder, document)
        seconds["embed"] = time.perf_counter() - began
    return Processed(seconds, encoded=encode_artifacts(document, chunks, table=table))


def can_run_in_child(embedder: Embedder) -> bool:
    """An embedder is sent to the children when it pickles (the built-in ones do); one
    holding threads, locks or sockets embeds in the job's thread instead, and so does one
    that waits on the network (`runs_in_child = False`): a slow endpoint must not count
    against the parse timeout, and waiting needs no core of its own. So does one defined in
    the caller's main module (a script's class): a child never imports that module
    (worker/child_start.py), and could not unpickle it."""
    if not getattr(embedder, "runs_in_child", True):
        return False
    try:
        _OutsideMain(io.BytesIO()).dump(embedder)
    except Exception:  # noqa: BLE001 - whatever stops it pickling, it embeds in the job's thread
        return False
    return True


class _OutsideMain(pickle.Pickler):
    """A pickler that refuses what a child would look up in `__main__`."""

    def persistent_id(self, obj: Any) -> None:
        if "__main__" in (type(obj).__module__, getattr(obj, "__module__", None)):
            raise pickle.PicklingError(f"{obj!r} is defined in __main__, which a parsing child does not import")


def _start_child(memory_bytes: int, embedder: Embedder | None = None) -> None:
    """Each child, once: cap its address space; lead a process group of its own (the
    parent's deadline kills the group); die with the worker even when the worker is killed
    outright (Linux); load the embedder's model before taking a task, so that loading it is
    not on any parse's clock."""
    lead_own_process_group()
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    warm = getattr(embedder, "warm", None)
    if callable(warm):
        # A model that does not load fails again at the first embed, failing that job clearly.
        with contextlib.suppress(Exception):
            warm()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the worker died before the prctl: do not linger
            os._exit(1)
    except (OSError, AttributeError):
        pass


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:g} {unit}" if unit == "B" else f"{count:.3g} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def describe_death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


class ParsePool:
    """The worker's parsing children, started on first use and stopped by `close()`.
    `target` is what a child runs (tests pass parsers that hang, allocate or crash).

    A pool that breaks (its manager thread gone, the fork server dead, a parse that outlived
    pebble's own time limit) is replaced: the jobs in flight on it raise WorkerFault, and
    the worker holds off claiming for a back-off that doubles with each such fault in a row
    (`cooldown_remaining`). A child killed by a signal is a worker fault too (pebble
    replaces the child, no back-off); the job row bounds how often one job is refunded for
    it (migration …_release_worker_faults.sql)."""

    def __init__(
        self,
        limits: ParseLimits,
        target: Callable[..., Processed] = process_document_in_child,
        *,
        embedder: Embedder | None = None,
    ):
        self.limits = limits
        self.target = target
        self._warm = embedder if embedder is not None and can_run_in_child(embedder) else None
        self._pool: pebble.ProcessPool | None = None
        self._generation = 0  # +1 at every rebuild: a task knows whether its pool is gone
        self._lock = threading.Lock()
        self._embedders: dict[int, bool] = {}
        self._tasks = TaskFiles()
        self._faults_in_a_row = 0
        self._cooldown_until = 0.0

    def _started(self) -> tuple[pebble.ProcessPool, int]:
        with self._lock:
            if self._pool is None:
                # The fork server imports the parsers and the embedder's libraries once; every
                # child it forks has them, so replacing a child (after its tasks, a timeout, a
                # crash) costs a fork, not the imports (half a second of CPU each).
                # worker.fork_server: a child started as its pool ends exits quietly. Never the
                # caller's main module (worker/child_start.py).
                embedder_modules = list(getattr(self._warm, "child_modules", ()))
                context = parse_context(
                    [
                        "ingestion_pipeline.worker.fork_server",
                        "ingestion_pipeline.worker.isolation",
                        *PARSER_MODULES,
                        *embedder_modules,
                    ]
                )
                self._pool = pebble.ProcessPool(
                    max_workers=self.limits.processes,
                    max_tasks=self.limits.tasks_per_child,
                    initializer=_start_child,
                    initargs=(self.limits.memory_bytes, self._warm),
                    context=context,
                )
            return self._pool, self._generation

    def accepts(self, embedder: Embedder) -> bool:
        """Whether `embedder` runs in the children (asked once per embedder object)."""
        key = id(embedder)
        if key not in self._embedders:
            self._embedders[key] = can_run_in_child(embedder)
        return self._embedders[key]

    def cooldown_remaining(self) -> float:
        """Seconds the worker should wait before claiming again, after a fault of its pool."""
        return max(0.0, self._cooldown_until - time.monotonic())

    def process(self, lost: threading.Event, *args: Any, **kwargs: Any) -> Processed:
        """Run `target(*args, **kwargs)` in a child and wait for it, giving the task up (and
        its child) when `lost` is set: the job's lease is gone, nothing it builds could be
        written. A parse is ended at its time limit from here (its child's process group
        killed) even when the pool can no longer do it itself."""
        pool, generation = self._started()
        task = self._tasks.new()
        try:
            future = pool.schedule(
                run_task, args=(str(task), self.target, args, kwargs), timeout=self.limits.timeout_seconds
            )
        except (RuntimeError, concurrent.futures.process.BrokenProcessPool) as exc:
            # pebble: "Unexpected error within the Pool" (a manager thread died), "The Pool
            # is not active": it will never take a task again.
            raise self._broken(generation, f"the parsing processes stopped working ({exc})") from None
        try:
            processed: Processed = self._wait(future, task, generation, lost)
        finally:
            task.unlink(missing_ok=True)
        self._faults_in_a_row = 0
        return processed

    def _wait(self, future: pebble.ProcessFuture[Processed], task: Path, generation: int, lost: threading.Event) -> Any:
        began: float | None = None  # when a child began the task (its file appeared)
        while True:
            try:
                return future.result(timeout=POLL_SECONDS)
            except concurrent.futures.TimeoutError:
                if future.done():  # the task's own time limit: pebble killed its child
                    raise self._timed_out() from None
                if lost.is_set():
                    future.cancel()  # pebble stops the child that runs it; a new one takes its place
                    kill_task_child(task)  # and so do we, in case pebble no longer can
                    raise LeaseLost("lease lost while the document was being parsed") from None
                if began is None and running_pid(task) is not None:
                    began = time.monotonic()
                self._check_pool(future, task, generation, began)
            except MemoryError:
                raise ProcessingError(
                    f"parsing needed more than {human_bytes(self.limits.memory_bytes)} of memory"
                ) from None
            except pebble.ProcessExpired as exc:
                # pebble replaced the child and the pool goes on: no back-off (a document that
                # kills every child would idle the worker for minutes); the job row bounds
                # how often such a death is refunded.
                raise self._fault(
                    f"the process parsing the document died ({describe_death(exc.exitcode)}); "
                    "the document may need more memory or time than the limits allow",
                    count=False,
                ) from None
            except concurrent.futures.process.BrokenProcessPool as exc:
                raise self._broken(generation, f"the parsing processes broke ({exc or 'no reason given'})") from None

    def _check_pool(self, future: Future[Any], task: Path, generation: int, began: float | None) -> None:
        """Between polls: the pool replaced or broken under the task, or the task past its
        time limit with pebble's grace spent (pebble could not stop it: its pool is wedged)."""
        pool = self._pool
        if generation != self._generation or pool is None:
            kill_task_child(task)  # the fault that replaced the pool was counted by whoever found it
            raise WorkerFault("the parsing processes were restarted while the document was parsed")
        if not pool.active:
            kill_task_child(task)
            raise self._broken(generation, "the parsing processes stopped working (their manager thread ended)")
        if began is not None and time.monotonic() > began + self.limits.timeout_seconds + DEADLINE_GRACE_SECONDS:
            pid = kill_task_child(task)
            future.cancel()
            log.warning(
                "parse of pid %s ran past its %g s limit and the pool did not stop it: killed its process "
                "group, replacing the pool",
                pid,
                self.limits.timeout_seconds,
            )
            self._broken(generation, "a parse outlived its time limit")
            raise self._timed_out()

    def _timed_out(self) -> ProcessingError:
        return ProcessingError(f"parsing took longer than {self.limits.timeout_seconds:g} s")

    def _fault(self, message: str, *, count: bool = True) -> WorkerFault:
        """A worker fault; `count`: the pool broke, and the worker backs off, doubling with
        each such fault in a row."""
        if not count:
            log.warning("parsing fault: %s", message)
            return WorkerFault(message)
        with self._lock:
            self._faults_in_a_row += 1
            delay = min(
                self.limits.fault_backoff_max_seconds,
                self.limits.fault_backoff_seconds * 2 ** (self._faults_in_a_row - 1),
            )
            self._cooldown_until = max(self._cooldown_until, time.monotonic() + delay)
        log.warning("parsing pool fault: %s; claiming again in %.1f s", message, delay)
        return WorkerFault(message)

    def _broken(self, generation: int, message: str) -> WorkerFault:
        """The pool of `generation` will take no task again: replace it (once, whichever job
        finds out first) and stop it and its children in the background."""
        with self._lock:
            old = self._pool if generation == self._generation else None
            if old is not None:
                self._pool, self._generation = None, self._generation + 1
        if old is not None:
            threading.Thread(target=_stop_pool, args=(old,), name="parse-pool-stop", daemon=True).start()
        return self._fault(message, count=old is not None)  # one pool, one fault: not one per job

    def close(self) -> None:
        """Stop every child (a task still running is abandoned with it)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            _stop_pool(pool)
        self._tasks.close()


def _stop_pool(pool: pebble.ProcessPool) -> None:
    try:
        pool.stop()
        pool.join(timeout=30)
    except Exception as exc:  # noqa: BLE001 - a broken pool may fail to stop cleanly; its children die with us
        log.warning("stopping the parsing pool: %s", exc)
