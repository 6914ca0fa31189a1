"""A client-side history of every RPC a worker makes, for the checker (Jepsen-style).

Each line is one call: who, what, which job, when it started and ended (wall clock, one
host), and what came back. Lines are flushed one by one: a SIGKILLed worker loses at most
the call it was in, whose outcome is then unknown, as in any real history.

A bulk statement is logged as one line per item, so the checker reads it as the calls it
replaces: each item of `complete_many` as `commit_and_complete` (an item with a
generation: commit and complete in one transaction) or `complete` (without), each item
of `fail_or_retry_many` as `fail_or_retry`, each lease of `heartbeat_many` as `heartbeat`
(`ok` false, reason `lease_lost`, for the leases it names lost). Every item line carries
its job, token and worker, the statement's t0/t1 (all of its items commit together),
the item's own answer (ok, reason, retried, generation_id, chunk_count), and `bulk`: the
statement (`pid:n`) and how many items it had. A statement that raised is not logged (its
outcome is unknown), as a single call that raised is not. On a schema without the bulk
RPCs the client makes one call per item, each logged as itself.

Besides the RPCs, the history holds each artifact write (call `write`: the COPY of one
generation's pages, sections and chunks, one transaction; `ok` when it committed, else
the SQLSTATE, IF001 being the database's artifact fence), each claim with the document
and the `version` it builds, each injected stall (call
`stall`, tests/faults/worker_process.py) and, in the janitor's own history, each of its
calls: `expire_stale` (with the `job_ids` it dead-lettered), `refresh_stuck_batches` and
`refresh_drifted_batches` (how many batches they recounted, and each of those `batches`
as the recount left it; the latter is no statement, and so not logged, on a schema before
the batch counters) and
`cleanup` (with what it deleted). A janitor call that raised is logged with `ok` null and
the `error` (its outcome is unknown), then re-raised.

The operator's lifecycle calls (the chaos loop's deletes, batch cancels and retries, worker
`operator`, in a history of their own) are logged the same way: `delete_document` (its
`document_id`, and from the answer `in_flight`, `purged`, `cancelled_job_id`, the batch
counters), `cancel_batch` (its `batch_id`, and `cancelled`, `in_flight`, `status`, the
batch), `new_version` (a source's bytes enqueued under its `collection` and `source_key`
and stored in one transaction, logged once it committed: the `outcome`, `document_id`,
`version` and `superseded_job_id`, the older version's job it cancelled) and `retry_failed`
(the bulk retry: its `mode`, the `requested_job_ids` and/or
`batch_id` it was given, and from the answer `retried`, `retried_job_ids` with
`retried_batches`, each retried job's batch, and `refused`, each refused job with its
reason); all carry `job_ids`, the jobs the call cancelled (none when it was refused, and
none for a retry), and `job_id` null, so no job rule reads them as a call of a job's own
claim.

A statement rolled back by the server with a SQLSTATE of class 40 (transaction rollback:
40P01 deadlock_detected, 40001 serialization_failure, ...) is logged, whoever sent it (a
worker's RPC or claim, in bulk or not, the janitor's, the operator's), as call `rollback`:
the `rpc` it was, its `sqlstate` and `error`, the worker (or `janitor`, `operator`), the
job (`job_id`, or `job_ids`, the items of a bulk statement) and t0/t1; then the error goes
on to the caller as before (a worker retries it as transient, the janitor and the operator
record it as an error of theirs, in an entry without a `sqlstate`, so each rollback is in
the history once). An artifact write rolled back so is its `write` entry with that
`sqlstate`. The checker counts every entry with a class-40 `sqlstate` as a violation."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from contextlib import contextmanager

import psycopg

from ingestion_pipeline.db.models import BatchesRefreshed, VersionEnqueued
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import BatchWasCancelled
from ingestion_pipeline.worker.errors import LeaseLost, describe, is_build_refused
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import enqueue_bytes

LOGGED_FENCED = {
    "rpc_commit_generation": "commit",
    "rpc_complete": "complete",
    "rpc_fail_or_retry": "fail_or_retry",
    "rpc_heartbeat": "heartbeat",
    "rpc_record_stage": "record_stage",
    "rpc_begin_generation": "begin_generation",
}
LOGGED_PLAIN = {"rpc_commit_and_complete": "commit_and_complete"}
# Bulk statements, logged one line per item (per lease for heartbeats).
LOGGED_BULK = ("rpc_complete_many", "rpc_fail_or_retry_many", "rpc_heartbeat_many")
# The janitor's calls (worker "janitor"): what each returned, or the error it raised.
LOGGED_JANITOR = {
    "rpc_expire_stale": "expire_stale",
    "rpc_refresh_stuck_batches": "refresh_stuck_batches",
    "rpc_refresh_drifted_batches": "refresh_drifted_batches",
    "rpc_cleanup": "cleanup",
}
JANITOR = "janitor"
# The operator's lifecycle calls (worker "operator"): what each returned, or the error it raised.
OPERATOR = "operator"
# The operator's calls that cancel jobs (their `job_ids`), and all of its calls: a new
# version of a document cancels the older version's open job (`superseded_job_id`).
OPERATOR_CANCELS = ("delete_document", "cancel_batch", "new_version")
OPERATOR_CALLS = (*OPERATOR_CANCELS, "retry_failed")
# SQLSTATE class 40, transaction rollback: the server rolled the statement back (a deadlock
# victim, 40P01; a serialization failure, 40001; ...). Each is logged as call `rollback`.
ROLLBACK_CLASS = "40"
DEADLOCK = "40P01"


def rolled_back(exc: BaseException) -> str | None:
    """The SQLSTATE of a class-40 error (the server rolled the transaction back), else None."""
    sqlstate = getattr(exc, "sqlstate", None) if isinstance(exc, psycopg.Error) else None
    return sqlstate if sqlstate and sqlstate.startswith(ROLLBACK_CLASS) else None


REFRESHED_BATCH = {"batch_id", "status", "total", "open", "completed", "failed"}


class HistoryFile:
    def __init__(self, path: str):
        self._file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives with the process
        self._lock = threading.Lock()

    def write(self, entry: dict) -> None:
        with self._lock:
            self._file.write(json.dumps(entry, default=str) + "\n")
            self._file.flush()


class LoggedRpc(AnySchemaRpc):
    """AnySchemaRpc that records claims, every fenced or generation-starting call, each item
    of a bulk acknowledgement or heartbeat, and the janitor-kind calls."""

    def __init__(self, db, history: HistoryFile, *, caller: str = JANITOR, **kwargs):
        super().__init__(db, **kwargs)
        self.history = history
        # Who the janitor-kind calls (expire_stale …) are recorded under: the janitor, or a
        # worker process whose claim loop dead-letters stale exhausted leases itself.
        self.caller = caller
        self._generations: dict[str, dict] = {}  # generation id -> the begin_generation call's params
        # The bulk statements name no worker: the public method that sends one says whose it is.
        self._bulk_caller = threading.local()
        self._statements = itertools.count(1)
        self._held_entries: list[dict] | None = None  # operator calls of an open one_transaction

    def _record(self, call: str, params: dict, started: float, result, ended: float | None = None, **extra) -> None:
        self.history.write(
            {
                "call": call,
                "pid": os.getpid(),
                "worker": params.get("worker_id"),
                "job_id": params.get("job_id"),
                "token": params.get("lease_token"),
                "t0": started,
                "t1": time.time() if ended is None else ended,
                "ok": None if result is None else result.ok,
                "reason": None if result is None else result.reason,
                "fenced": None if result is None else result.fenced,
                "generation_id": getattr(result, "generation_id", None),
                "chunk_count": getattr(result, "chunk_count", None),
                "retried": getattr(result, "retried", None),
                **extra,
            }
        )

    # -- bulk statements: one history line per item ------------------------------------

    @contextmanager
    def _sending_for(self, worker_id):
        self._bulk_caller.worker_id = worker_id
        try:
            yield
        finally:
            self._bulk_caller.worker_id = None

    def complete_many(self, worker_id, items):
        with self._sending_for(worker_id):
            return super().complete_many(worker_id, items)

    def fail_or_retry_many(self, worker_id, items):
        with self._sending_for(worker_id):
            return super().fail_or_retry_many(worker_id, items)

    def heartbeat_many(self, worker_id, leases):
        with self._sending_for(worker_id):
            return super().heartbeat_many(worker_id, leases)

    def _bulk_call(self, model, name, params, started: float):
        """Send the bulk statement; log one line per item with that item's own answer."""
        result = super()._result(model, name, params)
        ended = time.time()
        worker_id = getattr(self._bulk_caller, "worker_id", None)
        statement = f"{os.getpid()}:{next(self._statements)}"
        if name == "rpc_heartbeat_many":
            lost = {(str(ref.job_id), ref.lease_token) for ref in result.lost}
            for job_id, token in zip(params["job_ids"], params["lease_tokens"], strict=True):
                refused = (str(job_id), token) in lost
                self.history.write(
                    {
                        "call": "heartbeat",
                        "pid": os.getpid(),
                        "worker": worker_id,
                        "job_id": str(job_id),
                        "token": token,
                        "t0": started,
                        "t1": ended,
                        "ok": not refused,
                        "reason": "lease_lost" if refused else None,
                        "fenced": result.fenced,
                        "bulk": [statement, len(params["job_ids"])],
                    }
                )
            return result
        items = params["items"].obj
        for item, answer in zip(items, answers_per_item(items, result.results), strict=True):
            if name == "rpc_fail_or_retry_many":
                call = "fail_or_retry"
            else:
                call = "commit_and_complete" if item.get("generation_id") else "complete"
            extra = {"bulk": [statement, len(items)]}
            self._record(
                call,
                {"worker_id": worker_id, "job_id": item["job_id"], "lease_token": item["lease_token"]},
                started,
                answer,
                ended,
                **extra,
            )
        return result

    def expire_stale(self, stale_after_seconds=None):
        # A worker's claim loop skips it before the hardening, as that release's did
        # (AnySchemaRpc); the janitor calls it on any schema, and records the error.
        if self.caller == JANITOR:
            return IngestionRpc.expire_stale(self, stale_after_seconds)
        return super().expire_stale(stale_after_seconds)

    def _state_call(self, model, rpc, params):
        started = time.time()
        result = super()._state_call(model, rpc, params)
        if rpc in LOGGED_FENCED:
            self._record(LOGGED_FENCED[rpc], params, started, result)
        if rpc == "rpc_begin_generation" and result.ok and result.generation_id is not None:
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
        self.history.write(
            {
                "call": "write",
                "pid": os.getpid(),
                "worker": params.get("worker_id"),
                "job_id": params.get("job_id"),
                "token": params.get("lease_token"),
                "t0": started,
                "t1": time.time(),
                "ok": error is None,
                "reason": reason,
                "sqlstate": getattr(error, "sqlstate", None),
                "generation_id": generation_id,
            }
        )

    def record_stall(self, point: str, job_id, worker_id, lease_token, started: float, woke: str) -> None:
        self.history.write(
            {
                "call": "stall",
                "point": point,
                "woke": woke,
                "pid": os.getpid(),
                "worker": worker_id,
                "job_id": job_id,
                "token": lease_token,
                "t0": started,
                "t1": time.time(),
                "ok": True,
            }
        )

    def _value(self, name, params):
        """Every statement the client sends goes through here: one rolled back by the server
        (class 40) is logged as a `rollback`, then raised on."""
        started = time.time()
        try:
            return super()._value(name, params)
        except BaseException as exc:
            if rolled_back(exc):
                self.record_rollback(name, params, started, exc)
            raise

    def record_rollback(self, rpc: str, params: dict, started: float, exc: BaseException) -> None:
        """A statement the server rolled back (SQLSTATE class 40): who sent it, for which jobs."""
        items = getattr(params.get("items"), "obj", None)
        if items is not None:  # a bulk acknowledgement
            job_ids = [str(item["job_id"]) for item in items]
        else:
            job_ids = [str(job_id) for job_id in params.get("job_ids") or ()]
        worker = getattr(self._bulk_caller, "worker_id", None) or params.get("worker_id") or self.caller
        self.history.write(
            {
                "call": "rollback",
                "rpc": rpc,
                "pid": os.getpid(),
                "worker": worker,
                "job_id": None if params.get("job_id") is None else str(params["job_id"]),
                "job_ids": job_ids,
                "token": params.get("lease_token"),
                "t0": started,
                "t1": time.time(),
                "ok": None,
                "reason": None,
                "sqlstate": rolled_back(exc),
                "error": describe(exc),
            }
        )

    def _result(self, model, name, params):
        started = time.time()
        if name in LOGGED_JANITOR:
            return self._janitor_call(LOGGED_JANITOR[name], model, name, params, started)
        if name in LOGGED_BULK:
            return self._bulk_call(model, name, params, started)
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
        if isinstance(result, BatchesRefreshed):  # the batches a refresh recounted, as it left them
            extra["batches"] = [batch.model_dump(mode="json", include=REFRESHED_BATCH) for batch in result.batches]
        self.history.write({**entry, "t1": time.time(), "ok": result.ok, "reason": result.reason, **extra})
        return result

    # -- the operator's lifecycle calls ---------------------------------------------------

    def delete_document(self, document_id):
        return self._operator_call(
            "delete_document",
            {"document_id": str(document_id)},
            lambda: super(LoggedRpc, self).delete_document(document_id),
        )

    def cancel_batch(self, batch_id):
        return self._operator_call(
            "cancel_batch", {"batch_id": str(batch_id)}, lambda: super(LoggedRpc, self).cancel_batch(batch_id)
        )

    def retry_failed(self, *, job_ids=None, batch_id=None, mode: str | None = None):
        """The bulk retry (`retry_failed_ingestion_jobs`): the given jobs, a batch's failed
        ones, or (neither given) every failed job. `mode` names the harness's pick."""
        target = {
            "mode": mode or ("jobs" if job_ids is not None else "batch" if batch_id is not None else "all"),
            "requested_job_ids": None if job_ids is None else [str(job_id) for job_id in job_ids],
            "batch_id": None if batch_id is None else str(batch_id),
        }
        return self._operator_call(
            "retry_failed", target, lambda: super(LoggedRpc, self).retry_failed(job_ids=job_ids, batch_id=batch_id)
        )

    def new_version(self, conn: psycopg.Connection, *, content: bytes, **fields):
        """A source's bytes enqueued under its key (enqueue_document_version) and stored, in
        one transaction, as `ingest enqueue` does: logged when that transaction has
        committed (the older version's job is cancelled from then on, not before). A
        cancelled batch's refusal is an answer (`batch_cancelled`), not an error."""

        def send():
            try:
                return enqueue_bytes(conn, super(LoggedRpc, self).enqueue_version, content, **fields)
            except BatchWasCancelled:
                return VersionEnqueued(ok=False, reason="batch_cancelled")

        target = {"collection": fields["collection"], "source_key": fields["source_key"]}
        return self._operator_call("new_version", target, send)

    @contextmanager
    def one_transaction(self, conn: psycopg.Connection):
        """The operator calls made inside, and the caller's own statements (a lock taken
        first), as one transaction on `conn`; their entries are written once it committed,
        with that moment as `t1`, as a single call's would be. One that rolled back writes
        them as raised (`ok` null, the error), their outcome being none."""
        self._held_entries = held = []
        try:
            with conn.transaction():
                yield
        except BaseException as exc:
            for entry in held:
                self.history.write({**entry, "ok": None, "reason": None, "job_ids": [], "error": describe(exc)})
            raise
        else:
            committed = time.time()
            for entry in held:
                self.history.write({**entry, "t1": committed})
        finally:
            self._held_entries = None

    def _operator_call(self, call: str, target: dict, send):
        """One lifecycle call, logged with its answer and `job_ids`, the jobs it cancelled."""
        entry = {"call": call, "pid": os.getpid(), "worker": self.caller, "job_id": None, **target, "t0": time.time()}
        try:
            result = send()
        except BaseException as exc:
            self.history.write(
                {**entry, "t1": time.time(), "ok": None, "reason": None, "job_ids": [], "error": describe(exc)}
            )
            raise
        ended = time.time()
        answer = result.model_dump(mode="json", exclude={"ok", "reason", "fenced"})
        if call == "delete_document":
            cancelled = [answer["cancelled_job_id"]] if result.ok and answer.get("cancelled_job_id") else []
        elif call == "new_version":
            cancelled = [answer["superseded_job_id"]] if result.ok and answer.get("superseded_job_id") else []
        elif call == "retry_failed":  # it cancels nothing: its job_ids are the jobs it put back in the queue
            answer["retried_job_ids"] = [str(job_id) for job_id in answer.pop("job_ids", None) or []]
            answer["retried_batches"] = self._batches_of(answer["retried_job_ids"])
            cancelled = []
        else:
            cancelled = list(answer.get("job_ids") or []) if result.ok else []
        write = self.history.write if self._held_entries is None else self._held_entries.append
        write(
            {
                **entry,
                **answer,
                **target,
                "t1": ended,
                "ok": result.ok,
                "reason": result.reason,
                "job_ids": [str(job_id) for job_id in cancelled],
            }
        )
        return result

    def _batches_of(self, job_ids: list[str]) -> dict[str, str | None] | None:
        """Each job's batch (a job never changes batch), for the history; None when the
        look-up failed (the call is logged all the same)."""
        if not job_ids:
            return {}
        try:
            with self._connection() as conn:
                rows = conn.execute(
                    "select id, batch_id from ingestion_jobs where id = any(%s::uuid[])", (job_ids,)
                ).fetchall()
        except psycopg.Error:
            return None
        return {str(r["id"]): None if r["batch_id"] is None else str(r["batch_id"]) for r in rows}

    def claim(self, worker_id, limit=1, stale_after_seconds=None):
        started = time.time()
        try:
            jobs = super().claim(worker_id, limit, stale_after_seconds)
        except BaseException as exc:  # the claim is no _value statement: its rollbacks are logged here
            if rolled_back(exc):
                self.record_rollback("rpc_claim", {"worker_id": worker_id}, started, exc)
            raise
        for job in jobs:
            self.history.write(
                {
                    "call": "claim",
                    "pid": os.getpid(),
                    "worker": worker_id,
                    "job_id": str(job.job_id),
                    "t0": started,
                    "t1": time.time(),
                    "ok": True,
                    "attempt": job.attempt_count,
                    "token": job.lease_token,
                    # the version this claim builds (None before document versions): the
                    # checker's older_version_committed_after_newer
                    "document_id": str(job.document_id),
                    "version": job.document_version,
                }
            )
        return jobs


def answers_per_item(items: list[dict], results) -> list:
    """Each item's own answer from a bulk acknowledgement: the server names each answer's
    item by its position in the call (`item`, 1-based), so two claims of one job in one
    statement (a stalled thread's and its own loop's new claim) get their own answers."""
    by_item = {answer.item: answer for answer in results}
    return [by_item[position] for position in range(1, len(items) + 1)]


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
