"""A client-side history of every RPC a worker makes, for the checker (Jepsen-style).

Each line is one call: who, what, which job, when it started and ended (wall clock, one
host), and what came back. Lines are flushed one by one: a SIGKILLed worker loses at most
the call it was in, whose outcome is then unknown, as in any real history.

Besides the RPCs, the history holds each artifact write (call `write`: the COPY of one
generation's pages, sections and chunks, one transaction; `ok` when it committed, else
the SQLSTATE, IF001 being the database's artifact fence), each injected stall (call
`stall`, tests/faults/worker_process.py) and, in the janitor's own history, each of its
calls: `expire_stale` (with the `job_ids` it dead-lettered), `refresh_stuck_batches` and
`cleanup` (with what it deleted). A janitor call that raised is logged with `ok` null and
the `error` (its outcome is unknown), then re-raised."""

from __future__ import annotations

import json
import os
import threading
import time

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.worker.errors import LeaseLost, describe, is_build_refused

LOGGED_FENCED = {"commit_generation": "commit", "complete": "complete", "fail_or_retry": "fail_or_retry",
                 "heartbeat": "heartbeat", "record_stage": "record_stage", "begin_generation": "begin_generation"}
LOGGED_PLAIN = {"rpc_commit_and_complete": "commit_and_complete"}
# The janitor's calls (worker "janitor"): what each returned, or the error it raised.
LOGGED_JANITOR = {"rpc_expire_stale": "expire_stale", "rpc_refresh_stuck_batches": "refresh_stuck_batches",
                  "rpc_cleanup": "cleanup"}
JANITOR = "janitor"


class HistoryFile:
    def __init__(self, path: str):
        self._file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives with the process
        self._lock = threading.Lock()

    def write(self, entry: dict) -> None:
        with self._lock:
            self._file.write(json.dumps(entry, default=str) + "\n")
            self._file.flush()


class LoggedRpc(IngestionRpc):
    """IngestionRpc that records claims and every fenced or generation-starting call."""

    def __init__(self, db, history: HistoryFile, *, caller: str = JANITOR, **kwargs):
        super().__init__(db, **kwargs)
        self.history = history
        # Who the janitor-kind calls (expire_stale …) are recorded under: the janitor, or a
        # worker process whose claim loop dead-letters stale exhausted leases itself.
        self.caller = caller
        self._generations: dict[str, dict] = {}  # generation id -> the begin_generation call's params

    def _record(self, call: str, params: dict, started: float, result) -> None:
        self.history.write({
            "call": call, "pid": os.getpid(), "worker": params.get("worker_id"),
            "job_id": params.get("job_id"), "token": params.get("lease_token"), "t0": started, "t1": time.time(),
            "ok": result.ok, "reason": result.reason, "fenced": result.fenced,
            "generation_id": getattr(result, "generation_id", None),
            "chunk_count": getattr(result, "chunk_count", None),
            "retried": getattr(result, "retried", None)})

    def _fenced(self, model, rpc, params):
        started = time.time()
        result = super()._fenced(model, rpc, params)
        if rpc in LOGGED_FENCED:
            self._record(LOGGED_FENCED[rpc], params, started, result)
        if rpc == "begin_generation" and result.ok and result.generation_id is not None:
            self._generations[str(result.generation_id)] = params
        return result

    def record_write(self, generation_id, started: float, error: BaseException | None) -> None:
        """One artifact write of the generation begun by this process: who (the claim that
        began it: worker, job, token), when, and whether the database took the rows."""
        params = self._generations.pop(str(generation_id), {})
        if error is None:
            reason = None
        elif is_build_refused(error):
            reason = "lease_lost"  # refused by the database (the artifact fence, or the build is gone)
        elif isinstance(error, LeaseLost):
            reason = "lease_lost_client"  # the worker's own lease check stopped it first
        else:
            reason = describe(error)
        self.history.write({
            "call": "write", "pid": os.getpid(), "worker": params.get("worker_id"),
            "job_id": params.get("job_id"), "token": params.get("lease_token"), "t0": started, "t1": time.time(),
            "ok": error is None, "reason": reason, "sqlstate": getattr(error, "sqlstate", None),
            "generation_id": generation_id})

    def record_stall(self, point: str, job_id, worker_id, lease_token, started: float, woke: str) -> None:
        self.history.write({"call": "stall", "point": point, "woke": woke, "pid": os.getpid(), "worker": worker_id,
                            "job_id": job_id, "token": lease_token, "t0": started, "t1": time.time(), "ok": True})

    def _result(self, model, name, params):
        started = time.time()
        if name in LOGGED_JANITOR:
            return self._janitor_call(LOGGED_JANITOR[name], model, name, params, started)
        result = super()._result(model, name, params)
        if name in LOGGED_PLAIN:
            self._record(LOGGED_PLAIN[name], params, started, result)
        return result

    def _janitor_call(self, call: str, model, name, params, started: float):
        entry = {"call": call, "pid": os.getpid(), "worker": self.caller, "job_id": None, "t0": started}
        try:
            result = super()._result(model, name, params)
        except BaseException as exc:
            self.history.write({**entry, "t1": time.time(), "ok": None, "reason": None, "error": describe(exc)})
            raise
        extra = result.model_dump(mode="json", exclude={"ok", "reason", "fenced", "batches"})
        self.history.write({**entry, "t1": time.time(), "ok": result.ok, "reason": result.reason, **extra})
        return result

    def claim(self, worker_id, limit=1, stale_after_seconds=None):
        started = time.time()
        jobs = super().claim(worker_id, limit, stale_after_seconds)
        for job in jobs:
            self.history.write({"call": "claim", "pid": os.getpid(), "worker": worker_id, "job_id": str(job.job_id),
                                "t0": started, "t1": time.time(), "ok": True, "attempt": job.attempt_count,
                                "token": job.lease_token})
        return jobs


def read_history(paths) -> list[dict]:
    entries = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if line:
                    try:
                        entries.append(json.loads(line))
                    except json.JSONDecodeError:  # a line cut by SIGKILL
                        continue
    for entry in entries:
        if entry.get("job_id") is not None:
            entry["job_id"] = str(entry["job_id"])
    return sorted(entries, key=lambda e: e["t0"])
