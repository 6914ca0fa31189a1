"""Checks a fault run, in the spirit of Jepsen's total-queue: from the client-side history
of every RPC (the workers' and the janitor's) and the final database state, after draining.

Violations (never expected), each under a rule name (`Report.by_rule`; RULES lists them):

  history
    double_completion          a job completed ok twice
    write_after_takeover       a write accepted from a worker after another worker had
                               claimed the job (histories without tokens)
    superseded_token_write     a write accepted with a token older than that of a claim
                               that had returned before it began
    write_after_expiry         a write accepted after an expire_stale (the janitor's, or a
                               claim loop's own) had dead-lettered the job (returned
                               before the write began),
                               from the claim that was expired
    generation_not_found       a commit that found its build deleted under its open job
    older_version_committed_after_newer  a commit accepted of a build of version v of a
                               document (the version its claim returned) begun after a
                               commit of a newer version of that document had returned ok
                               (the version fence: the latest version always wins)
    write_after_cancel         a write accepted (or a claim returned) for a job after an
                               operator's delete_document or cancel_batch that cancelled
                               it had returned (`cancelled` is terminal: nothing reopens it)
    retry_reopened_cancelled_batch  an operator's retry_failed that put back in the queue
                               a job of a batch whose cancel_batch had returned ok before
                               the retry began (a retry refuses a cancelled batch's jobs)
  rollbacks (any caller: a worker, the janitor, the operator; rpc_log `rollback` entries
  and artifact writes, each with its SQLSTATE: the server rolled the statement back)
    deadlock                   a statement that got 40P01 (deadlock_detected): the lock
                               order is one, so no two calls may deadlock; a worker
                               retries its acknowledgement, which hides it everywhere else
    serialization_failure      a statement that got any other SQLSTATE of class 40
                               (40001 serialization_failure, ...)
  jobs and batches
    lost_job                   a job not terminal (completed, failed, cancelled) after draining
    batch_mismatch             a batch not terminal, or its counts unlike its jobs
  batch counters (every transition moves them in the transaction that moves its job, so
  in any one snapshot they equal a count of the batch's job rows)
    batch_counter_drift        at the end (after the final janitor pass), a batch whose
                               counters (total, open, completed, failed, cancelled files)
                               differ from a count of its job rows, or whose status differs
                               from what they imply (open > 0: processing; else cancelled_at
                               set: cancelled; else failed > 0: completed_with_errors; else
                               completed); every batch, with jobs or without (`open_files`,
                               `cancelled_files` where the schema has them)
    batch_drift_repaired       the janitor's refresh_drifted_batches recounted a batch, or
                               its refresh_stuck_batches one with jobs (status open with
                               none of them open), during the run: a drift the janitor
                               healed before the end, a violation all the same
  jobs against documents
    completed_job_not_indexed  a completed job (stage not 'superseded') whose document is
                               not `indexed` with a committed generation (a document
                               deleted since is not expected to be)
    document_open_without_job  a document `queued`/`processing` while none of its jobs is
                               open (or it has none); `deleted` and `cancelled` ones are done
    failed_document_last_job   a `failed` document whose last job did not fail
    failed_document_committed  a `failed` document with a committed generation
    committed_by_unfinished_job  an indexed document's committed generation was begun by
                               a job that did not complete (the split-commit failure)
    stale_version_committed    a keyed document whose committed generation was not built
                               from its latest version although a job of that version
                               completed, or whose generation, the job that built it and
                               `indexed_version` disagree on the version it holds (when the
                               latest version failed or was cancelled, the last one built
                               stays: the previous version's index is kept)
  documents
    indexed_generations        an `indexed` document without exactly one committed
                               generation, or not pointing at it
    counts_mismatch            its counts differ from its committed rows
    lost_chunks                its committed chunks differ from a re-parse of its source
                               (the latest version's bytes: only those are kept, so a
                               document indexed at an older version is not re-parsed)
  the operator's deletes, cancels, retries and new versions (operator.jsonl; a new version
  cancels the older version's open job, which the write_after_cancel rule then covers; a
  document is deleted when a delete_document returned ok for it or the database says so:
  status `deleted` or deleted_at set)
    deleted_document_searchable  a deleted document with a row in committed_document_chunks
                               or found by search (ingestion_pipeline.search)
    deleted_document_rows_left a deleted document with rows left in document_pages,
                               document_sections, document_chunks, index_generations or
                               document_sources after the final janitor pass (whose
                               cleanup runs until it finds nothing more)
    cancelled_batch_not_cancelled  a batch whose cancel_batch returned ok that is not
                               `cancelled` at the end (nothing in the chaos reopens one)
  a source kept in sync (check_source, after the final sync of a churned folder and the
  drain; tests/faults/test_sync_churn.py)
    vanished_source_live       a live document of the source's collection, under its folder,
                               whose file no longer exists
    source_file_without_document  a file of the folder without a live document of its key
                               (a sync's delete that took a version enqueued after its
                               listing leaves one, until a later sync finds the file new)
    source_text_not_committed  a file of the folder whose document is not indexed at its
                               latest version, or whose latest version's bytes (sha-256)
                               are not the file's current bytes
  syncs racing new versions (tests/faults/sync_race.py, its log of raced passes)
    sync_deleted_newer_version a sync's delete accepted for a key whose newer version an
                               enqueue had returned after the sync read its vanished keys and
                               before the delete began (the delete carries the listing's
                               version: migration 20261204000200)
  deletion audit (the harness's test-only triggers, harness.install_deletion_audit)
    generation_deleted_under_open_job  a generation deleted while the job that began it
                               was `processing` under that claim (R23; a job put back
                               in the queue keeps its last token until its next claim,
                               and a pending job is under no claim)
    artifacts_deleted_under_open_job   artifact rows of such a build deleted (direct
                               deletes; rows going by cascade with their generation are
                               covered by the generation's entry)

A bulk statement (complete_many, fail_or_retry_many, heartbeat_many) is in the history
as one entry per item, named as the single call it replaces (rpc_log.py), so every rule
reads it as it reads those calls.

Redeliveries (a job claimed more than once) are expected under faults and reported apart,
as are the operator's retries (`lifecycle`: calls, jobs retried, refusals by reason),
the refusals of a worker whose job an operator cancelled (`cancel_refusals`: a
`lease_lost` answer or a refused artifact write begun after the cancel returned;
`cancel_refusals_during`: under way while it ran), the zombie refusals
(`zombie_refusals`: a `lease_lost` answer, or an artifact write refused by the fence
(IF001) or because its build was gone (23503), on a job another claim had taken since or
the janitor had dead-lettered since) and the janitor's calls and errors.

A write (an RPC that changes state, or an artifact write) has lost its lease when a newer
claim of its job had already returned when it began. With lease tokens that is exact: the
write carries a token lower than that of a claim whose call had ended before the write
began (`superseded_token_writes`; each is also a violation). Without tokens (schemas before
the lease-token migration) the history can only compare worker ids: the write's worker is
not the one of the last claim returned. A worker id reused by one claim loop is invisible
to that check; the token check sees it."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import chunk_sections, parse
from tests.faults.rpc_log import (
    DEADLOCK,
    JANITOR,
    LOGGED_JANITOR,
    OPERATOR,
    OPERATOR_CALLS,
    OPERATOR_CANCELS,
    ROLLBACK_CLASS,
    read_history,
)
from tests.helpers import search_hits

WRITES = {
    "commit",
    "complete",
    "commit_and_complete",
    "fail_or_retry",
    "heartbeat",
    "record_stage",
    "begin_generation",
    "write",
}
COMPLETIONS = {"complete", "commit_and_complete"}
COMMITS = {"commit", "commit_and_complete"}
JANITOR_CALLS = set(LOGGED_JANITOR.values())
# An artifact write refused: the artifact fence (IF001), or the generation was already
# cleaned up under a zombie whose job had completed since (23503).
REFUSED_WRITES = {"IF001", "23503"}
# Unfenced fallbacks for RPCs the old schema lacks write nothing at all.
NO_OP_WHEN_UNFENCED = {"heartbeat", "record_stage"}
# The janitor's repair path for batches: what a refresh found had drifted.
BATCH_REPAIRS = {"refresh_stuck_batches", "refresh_drifted_batches"}
OPEN = ("pending", "processing")
TERMINAL_JOB = ("completed", "failed", "cancelled")
# Tables that hold a document's rows: none may be left for a deleted document.
DOCUMENT_TABLES = ("document_pages", "document_sections", "document_chunks", "index_generations", "document_sources")
# Every word of the seeded documents (harness.WORDS), as one search: all of them are found.
SEARCH_ALL = " or ".join(
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november document".split()
)

RULES = (
    "double_completion",
    "write_after_takeover",
    "superseded_token_write",
    "write_after_expiry",
    "generation_not_found",
    "older_version_committed_after_newer",
    "lost_job",
    "batch_mismatch",
    "batch_counter_drift",
    "batch_drift_repaired",
    "completed_job_not_indexed",
    "document_open_without_job",
    "failed_document_last_job",
    "failed_document_committed",
    "committed_by_unfinished_job",
    "stale_version_committed",
    "indexed_generations",
    "counts_mismatch",
    "lost_chunks",
    "generation_deleted_under_open_job",
    "artifacts_deleted_under_open_job",
    "write_after_cancel",
    "deleted_document_searchable",
    "deleted_document_rows_left",
    "cancelled_batch_not_cancelled",
    "retry_reopened_cancelled_batch",
    "deadlock",
    "serialization_failure",
    "vanished_source_live",
    "source_file_without_document",
    "source_text_not_committed",
    "sync_deleted_newer_version",
    "search_term_counts_drift",
)


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    by_rule: Counter = field(default_factory=Counter)
    redeliveries: int = 0
    stats: dict = field(default_factory=dict)

    def flag(self, rule: str, message: str) -> None:
        assert rule in RULES, rule
        self.violations.append(message)
        self.by_rule[rule] += 1

    def summary(self) -> str:
        shown = "\n  ".join(self.violations[:20])
        return (
            f"{self.stats} redeliveries={self.redeliveries} violations={len(self.violations)}"
            f" {dict(self.by_rule)}" + (f"\n  {shown}" if shown else "")
        )


def check(url: str, history_paths) -> Report:
    history = read_history(history_paths)
    report = Report()
    _check_history(history, report)
    with connect(url) as conn:
        _check_jobs_and_batches(conn, report)
        _check_batch_counters(conn, report)
        _check_jobs_against_documents(conn, report)
        _check_documents(conn, report)
        _check_search_term_counts(conn, report)
        _check_deletion_audit(conn, report)
        _check_lifecycle(conn, history, report)
    claims = Counter(e["job_id"] for e in history if e["call"] == "claim")
    report.redeliveries = sum(n - 1 for n in claims.values() if n > 1)
    writes = [e for e in history if e["call"] == "write"]
    bulk = {tuple(e["bulk"]) for e in history if e.get("bulk") and e["call"] != "heartbeat"}
    janitor = [e for e in history if e["worker"] == JANITOR and e["call"] in JANITOR_CALLS]
    report.stats.update(
        calls=len(history),
        claims=sum(claims.values()),
        stalls=sum(1 for e in history if e["call"] == "stall"),
        artifact_writes=len(writes),
        # by SQLSTATE: IF001 the artifact fence, 23503 a generation already cleaned up
        artifact_writes_refused=dict(Counter(e["sqlstate"] for e in writes if e.get("sqlstate") in REFUSED_WRITES)),
        # acknowledgements sent in bulk statements: how many statements, how many items
        bulk_acks={
            "statements": len(bulk),
            "items": sum(n for _, n in bulk),
            "largest": max((n for _, n in bulk), default=0),
        },
        janitor_calls=len(janitor),
        janitor_call_errors=sum(1 for e in janitor if e["ok"] is not True),
        expired_by_janitor=sum(len(e.get("job_ids") or []) for e in janitor if e["call"] == "expire_stale" and e["ok"]),
    )
    return report


def check_source(url: str, collection: str, folder: Path, report: Report) -> None:
    """The index against the folder it mirrors, at quiescence (after the final sync and the
    drain): every live document's file exists, and every file is indexed at a latest
    version whose bytes are the file's."""
    files = {
        path.absolute().as_uri(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in folder.rglob("*")
        if path.is_file() and not path.name.startswith(".")
    }
    prefix = folder.absolute().as_uri() + "/"
    with connect(url) as conn:
        rows = conn.execute(
            "select d.id, d.source_key, d.status, d.version, d.indexed_version, v.content_sha256"
            "  from documents d left join document_versions v on v.document_id = d.id and v.version = d.version"
            " where d.collection = %s and d.deleted_at is null and starts_with(d.source_key, %s)",
            (collection, prefix),
        ).fetchall()
    live = {row["source_key"]: row for row in rows}
    for key, row in sorted(live.items()):
        if key not in files:
            report.flag("vanished_source_live", f"vanished_source_live: {key} is gone but document {row['id']} is live")
    for key, sha in sorted(files.items()):
        row = live.get(key)
        if row is None:
            report.flag("source_file_without_document", f"source_file_without_document: {key} has no live document")
        elif row["status"] != "indexed" or row["indexed_version"] != row["version"] or row["content_sha256"] != sha:
            report.flag(
                "source_text_not_committed",
                f"source_text_not_committed: {key} is {row['status']} at version {row['indexed_version']} of "
                f"{row['version']}, whose bytes {'are' if row['content_sha256'] == sha else 'are not'} the file's",
            )


def _claims_by_job(history: list[dict]) -> dict[str, list[dict]]:
    claims: dict[str, list[dict]] = defaultdict(list)
    for entry in history:
        if entry["call"] == "claim":
            claims[entry["job_id"]].append(entry)
    return claims


def _taken_over(entry: dict, claims: list[dict]) -> dict | None:
    """A claim of the job, other than the one `entry` was made under, that had returned
    before `entry` began and is newer (token) or, without tokens, the last one returned
    and of another worker."""
    before = [c for c in claims if c["t1"] < entry["t0"]]
    if not before:
        return None
    if entry.get("token") is not None:
        newest = max(before, key=lambda c: c.get("token") or 0)
        return newest if (newest.get("token") or 0) > entry["token"] else None
    return before[-1] if before[-1]["worker"] != entry["worker"] else None


def _is_write(entry: dict) -> bool:
    return entry["call"] in WRITES and not (entry["call"] in NO_OP_WHEN_UNFENCED and not entry.get("fenced", True))


def _check_history(history: list[dict], report: Report) -> None:
    completions = Counter(e["job_id"] for e in history if e["call"] in COMPLETIONS and e["ok"])
    for job_id, count in completions.items():
        if count > 1:
            report.flag("double_completion", f"job {job_id} completed ok {count} times")

    claims_by_job = _claims_by_job(history)
    expiries = _expiries(history)
    superseded = 0
    refusals = 0
    for entry in history:
        if not _is_write(entry):
            continue
        newer = _taken_over(entry, claims_by_job.get(entry["job_id"], []))
        gone = newer is not None or any(e["t1"] < entry["t0"] for e in expiries.get(entry["job_id"], []))
        if (
            entry["ok"] is False
            and gone
            and (
                entry.get("sqlstate") in REFUSED_WRITES
                if entry["call"] == "write"
                else entry.get("reason") == "lease_lost"
            )
        ):
            refusals += 1  # a zombie came back (reclaimed or dead-lettered since) and was refused
        if not entry["ok"] or newer is None:
            continue
        if entry.get("token") is not None:
            superseded += 1
            report.flag(
                "superseded_token_write",
                f"{entry['call']} by {entry['worker']} on job {entry['job_id']} accepted with token "
                f"{entry['token']} after {newer['worker']} had claimed it with token {newer['token']}",
            )
        else:
            report.flag(
                "write_after_takeover",
                f"{entry['call']} by {entry['worker']} on job {entry['job_id']} accepted after "
                f"{newer['worker']} had claimed it",
            )
    report.stats["superseded_token_writes"] = superseded
    report.stats["zombie_refusals"] = refusals
    _check_writes_after_expiry(history, claims_by_job, expiries, report)
    _check_writes_after_cancel(history, report)
    _check_retries_after_cancel(history, report)
    _check_rollbacks(history, report)
    _check_version_order(history, report)
    for entry in history:
        if entry["call"] in COMMITS and entry["ok"] is False and entry.get("reason") == "generation_not_found":
            report.flag("generation_not_found", f"build of job {entry['job_id']} was deleted under an open job")
    _check_batch_repairs(history, report)


def _check_version_order(history: list[dict], report: Report) -> None:
    """No older version commits after a newer one: per document, a commit accepted for a
    build of version v (its claim's version, matched by job and token) begun after a
    commit of a version above v had returned ok. Claims on schemas before versions carry
    none, and are left out."""
    claimed = {
        (c["job_id"], c.get("token")): c for c in history if c["call"] == "claim" and c.get("version") is not None
    }
    commits: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for entry in history:
        claim = claimed.get((entry["job_id"], entry.get("token"))) if entry["call"] in COMMITS else None
        if claim is not None and entry["ok"]:
            commits[claim["document_id"]].append((claim["version"], entry))
    for document_id, built in commits.items():
        for version, entry in built:
            newer = [(v, e) for v, e in built if v > version and e["t1"] < entry["t0"]]
            if newer:
                v, e = max(newer, key=lambda item: item[0])
                report.flag(
                    "older_version_committed_after_newer",
                    f"{entry['call']} of version {version} of document {document_id} (job {entry['job_id']}, "
                    f"by {entry['worker']}) accepted after version {v} had committed (job {e['job_id']})",
                )
    report.stats["versions_committed"] = dict(Counter(v for built in commits.values() for v, _ in built))


def _check_batch_repairs(history: list[dict], report: Report) -> None:
    """Every batch the janitor's repair path recounted had drifted from its jobs (the
    refreshes select them in one snapshot, in which the counters and the job rows agree
    unless something moved one without the other). The one refresh that is no drift: a
    batch `pending` with no job at all for ten minutes, which refresh_stuck_batches ends
    `completed` (its recount finds no job)."""
    repaired = 0
    for entry in history:
        if entry["call"] not in BATCH_REPAIRS or not entry["ok"]:
            continue
        if "batches" not in entry:  # a history without the recounted batches: only how many
            found = [{"batch_id": "?", "total": None}] * (entry.get("refreshed") or 0)
        else:
            found = entry["batches"]
        for batch in found:
            if entry["call"] == "refresh_stuck_batches" and batch.get("total") == 0:
                continue
            repaired += 1
            report.flag(
                "batch_drift_repaired",
                f"{entry['call']} by {entry['worker']} recounted batch {batch['batch_id']} "
                f"(now {batch.get('status')} total/open/completed/failed {batch.get('total')}/"
                f"{batch.get('open')}/{batch.get('completed')}/{batch.get('failed')}): its counters had "
                f"drifted from its jobs",
            )
    report.stats["batch_repairs"] = repaired


def _expiries(history: list[dict]) -> dict[str, list[dict]]:
    """The janitor's expire_stale calls that dead-lettered each job."""
    expiries: dict[str, list[dict]] = defaultdict(list)
    for entry in history:
        if entry["call"] == "expire_stale" and entry["ok"]:
            for job_id in entry.get("job_ids") or []:
                expiries[str(job_id)].append(entry)
    return expiries


def _check_writes_after_expiry(
    history: list[dict], claims_by_job: dict[str, list[dict]], expiries: dict[str, list[dict]], report: Report
) -> None:
    """The janitor dead-lettered a job (its expire_stale returned before the write began):
    from then on no write of the claim it expired may be accepted. A later claim (after an
    operator retry) began after the expiry did: its writes are its own."""
    for entry in history:
        if not entry["ok"] or not _is_write(entry) or entry["job_id"] not in expiries:
            continue
        for expiry in expiries[entry["job_id"]]:
            if expiry["t1"] >= entry["t0"]:
                continue
            own_claims = [
                c
                for c in claims_by_job.get(entry["job_id"], [])
                if (
                    c.get("token") == entry["token"]
                    if entry.get("token") is not None
                    else c["worker"] == entry["worker"]
                )
                and expiry["t0"] < c["t0"]
                and c["t1"] < entry["t0"]
            ]
            if not own_claims:
                report.flag(
                    "write_after_expiry",
                    f"{entry['call']} by {entry['worker']} on job {entry['job_id']} (token {entry['token']}) "
                    f"accepted after the janitor had expired the job",
                )
                break


def _cancellations(history: list[dict]) -> dict[str, list[dict]]:
    """The operator's calls that cancelled each job (a delete or a batch cancel that
    returned ok, its `job_ids`)."""
    cancels: dict[str, list[dict]] = defaultdict(list)
    for entry in history:
        if entry["call"] in OPERATOR_CANCELS and entry["ok"]:
            for job_id in entry.get("job_ids") or []:
                cancels[str(job_id)].append(entry)
    return cancels


def _check_writes_after_cancel(history: list[dict], report: Report) -> None:
    """A job an operator cancelled (its delete_document or cancel_batch returned before
    the write began) takes no write, from any claim, and no claim: `cancelled` is
    terminal and the retries refuse it. The refusals such a worker got are counted: of
    calls begun after the cancel returned (`cancel_refusals`), and of calls under way
    while it ran (`cancel_refusals_during`: begun before it returned, ended after it
    began; most likely waiting on the job row it held)."""
    cancels = _cancellations(history)
    refusals = during = 0
    for entry in history:
        if entry["job_id"] not in cancels or not (_is_write(entry) or entry["call"] == "claim"):
            continue
        refused = entry["ok"] is False and (
            entry.get("sqlstate") in REFUSED_WRITES if entry["call"] == "write" else entry.get("reason") == "lease_lost"
        )
        cancel = next((c for c in cancels[entry["job_id"]] if c["t1"] < entry["t0"]), None)
        if cancel is None:
            # Began before the cancel returned, ended after it began: refused, most likely by it.
            during += refused and any(c["t0"] < entry["t1"] for c in cancels[entry["job_id"]])
            continue
        refusals += refused
        if not entry["ok"]:
            continue
        what = "claimed" if entry["call"] == "claim" else f"{entry['call']} accepted"
        report.flag(
            "write_after_cancel",
            f"job {entry['job_id']} {what} (by {entry['worker']}, token {entry.get('token')}) after "
            f"{cancel['call']} of {cancel.get('document_id') or cancel.get('batch_id')} had cancelled it",
        )
    report.stats["cancel_refusals"] = refusals
    report.stats["cancel_refusals_during"] = during


def _check_retries_after_cancel(history: list[dict], report: Report) -> None:
    """A batch cancelled ok stays cancelled: no retry puts its jobs back in the queue (the
    retry's `retried_batches` names each retried job's batch). A cancel that returned
    before the retry began; the operator makes one call at a time."""
    cancelled_at: dict[str, float] = {}
    for entry in history:
        if entry["call"] == "cancel_batch" and entry["ok"]:
            cancelled_at.setdefault(str(entry["batch_id"]), entry["t1"])
    for entry in history:
        if entry["call"] != "retry_failed" or not entry["ok"]:
            continue
        for job_id, batch_id in (entry.get("retried_batches") or {}).items():
            if batch_id is not None and cancelled_at.get(batch_id, entry["t0"]) < entry["t0"]:
                report.flag(
                    "retry_reopened_cancelled_batch",
                    f"retry_failed ({entry.get('mode')}) put job {job_id} back in the queue, of batch "
                    f"{batch_id} which cancel_batch had cancelled before",
                )


def _check_rollbacks(history: list[dict], report: Report) -> None:
    """Every statement the server rolled back (SQLSTATE class 40), whoever sent it: the
    history has one entry with its `sqlstate` per such statement (rpc_log.py)."""
    by_caller: Counter = Counter()
    for entry in history:
        sqlstate = entry.get("sqlstate") or ""
        if not sqlstate.startswith(ROLLBACK_CLASS):
            continue
        caller = entry["worker"] if entry["worker"] in (JANITOR, OPERATOR) else "worker"
        by_caller[f"{caller} {sqlstate}"] += 1
        jobs = entry.get("job_ids") or ([entry["job_id"]] if entry.get("job_id") else [])
        what = (
            f"{entry.get('rpc') or entry['call']} by {entry['worker']}"
            + (f" (jobs {', '.join(map(str, jobs))})" if jobs else "")
            + f" got {sqlstate}: {entry.get('error')}"
        )
        report.flag("deadlock" if sqlstate == DEADLOCK else "serialization_failure", what)
    report.stats["deadlocks"] = sum(n for key, n in by_caller.items() if key.endswith(DEADLOCK))
    report.stats["serialization_failures"] = sum(n for key, n in by_caller.items() if not key.endswith(DEADLOCK))
    report.stats["rollbacks_by_caller"] = dict(by_caller)


def _batch_status(open_: int, failed: int, cancelled_at) -> str:
    """The status a batch's counters imply (the lifecycle contract's rule)."""
    if open_:
        return "processing"
    if cancelled_at is not None:
        return "cancelled"
    return "completed_with_errors" if failed else "completed"


def _check_jobs_and_batches(conn, report: Report) -> None:
    rows = conn.execute("select status, count(*) as n from ingestion_jobs group by status").fetchall()
    report.stats["jobs"] = {r["status"]: r["n"] for r in rows}
    for row in conn.execute("select id from ingestion_jobs where status in ('pending', 'processing')"):
        report.flag("lost_job", f"job {row['id']} lost: never reached a terminal state")
    batches = conn.execute("""
        select b.id, b.status, b.total_files, b.completed_files, b.failed_files,
               to_jsonb(b) ->> 'cancelled_at' as cancelled_at,
               count(j.id) as jobs,
               count(j.id) filter (where j.status = 'completed') as completed,
               count(j.id) filter (where j.status = 'failed') as failed
          from import_batches b left join ingestion_jobs j on j.batch_id = b.id
         group by b.id""").fetchall()
    for b in batches:
        expected = _batch_status(0, b["failed"], b["cancelled_at"])
        if b["jobs"] and (
            b["status"] != expected
            or (b["total_files"], b["completed_files"], b["failed_files"]) != (b["jobs"], b["completed"], b["failed"])
        ):
            report.flag(
                "batch_mismatch",
                f"batch {b['id']} is {b['status']} {b['total_files']}/{b['completed_files']}/"
                f"{b['failed_files']} but its jobs say {expected} {b['jobs']}/{b['completed']}/{b['failed']}",
            )


def _check_batch_counters(conn, report: Report) -> None:
    """Every batch's counters and status against a count of its job rows, in one snapshot
    (the checker runs after the fleet and the janitor stopped). `open_files` is read
    through to_jsonb: schemas before the batch counters have no such column."""
    batches = conn.execute("""
        select b.id, b.status, b.total_files, b.completed_files, b.failed_files,
               (to_jsonb(b) ->> 'open_files')::integer as open_files,
               (to_jsonb(b) ->> 'cancelled_files')::integer as cancelled_files,
               to_jsonb(b) ->> 'cancelled_at' as cancelled_at,
               coalesce(c.total, 0) as total, coalesce(c.open, 0) as open,
               coalesce(c.completed, 0) as completed, coalesce(c.failed, 0) as failed,
               coalesce(c.cancelled, 0) as cancelled
          from import_batches b
          left join (select j.batch_id, count(*) as total,
                            count(*) filter (where j.status in ('pending', 'processing')) as open,
                            count(*) filter (where j.status = 'completed') as completed,
                            count(*) filter (where j.status = 'failed') as failed,
                            count(*) filter (where j.status = 'cancelled') as cancelled
                       from ingestion_jobs j where j.batch_id is not null group by j.batch_id) c
            on c.batch_id = b.id
         order by b.id""").fetchall()
    for b in batches:
        counters = (b["total_files"], b["open_files"], b["completed_files"], b["failed_files"], b["cancelled_files"])
        counted = (
            b["total"],
            b["open"] if b["open_files"] is not None else None,
            b["completed"],
            b["failed"],
            b["cancelled"] if b["cancelled_files"] is not None else None,
        )
        expected = _batch_status(b["open"], b["failed"], b["cancelled_at"])
        status_drifted = b["total"] > 0 and b["status"] != expected  # a batch without jobs may be pending
        if b["cancelled_files"] is None and b["cancelled"]:  # cancelled jobs on a schema without the counter
            status_drifted = True
        if counters != counted or status_drifted:
            report.flag(
                "batch_counter_drift",
                f"batch {b['id']} says {b['status']} total/open/completed/failed/cancelled "
                f"{'/'.join(map(str, counters))} but its job rows say "
                f"{expected if b['total'] else b['status']} {'/'.join(map(str, counted))}",
            )
    report.stats["batches"] = len(batches)
    report.stats["batches_cancelled"] = sum(1 for b in batches if b["status"] == "cancelled")


def _check_jobs_against_documents(conn, report: Report) -> None:
    """Every job against its document, every document against its jobs."""
    for row in conn.execute("""
        select j.id, j.document_id, d.status as document_status,
               exists (select 1 from index_generations g
                        where g.document_id = d.id and g.status = 'committed') as committed
          from ingestion_jobs j join documents d on d.id = j.document_id
         where j.status = 'completed' and j.stage <> 'superseded'
           and d.deleted_at is null and d.status <> 'deleted'
           and not (d.status = 'indexed' and exists (select 1 from index_generations g
                                                      where g.document_id = d.id and g.status = 'committed'))
        """):
        report.flag(
            "completed_job_not_indexed",
            f"job {row['id']} completed but its document {row['document_id']} is {row['document_status']}"
            f"{'' if row['committed'] else ' without a committed generation'}",
        )
    documents = conn.execute("""
        select d.id, d.status,
               (select count(*) from ingestion_jobs j where j.document_id = d.id) as jobs,
               (select count(*) from ingestion_jobs j
                 where j.document_id = d.id and j.status in ('pending', 'processing')) as open_jobs,
               (select j.status from ingestion_jobs j where j.document_id = d.id
                 order by coalesce(j.completed_at, j.updated_at) desc, j.created_at desc limit 1) as last_job,
               (select count(*) from index_generations g
                 where g.document_id = d.id and g.status = 'committed') as committed,
               (select j.status from index_generations g join ingestion_jobs j on j.id = g.job_id
                 where g.document_id = d.id and g.status = 'committed' limit 1) as committed_by
          from documents d where d.deleted_at is null""").fetchall()
    for d in documents:
        if d["status"] in ("queued", "processing") and not d["open_jobs"]:
            report.flag(
                "document_open_without_job",
                f"document {d['id']} is {d['status']} but none of its {d['jobs']} jobs is open",
            )
        if d["status"] == "failed" and d["last_job"] != "failed":
            report.flag("failed_document_last_job", f"document {d['id']} is failed but its last job is {d['last_job']}")
        if d["status"] == "failed" and d["committed"]:
            report.flag("failed_document_committed", f"document {d['id']} is failed with a committed generation")
        if d["status"] == "indexed" and d["committed"] and d["committed_by"] != "completed":
            report.flag(
                "committed_by_unfinished_job",
                f"document {d['id']} is indexed by a generation whose job is {d['committed_by']}",
            )
    report.stats["documents"] = dict(Counter(d["status"] for d in documents))
    _check_committed_versions(conn, report)


def _check_committed_versions(conn, report: Report) -> None:
    """At quiescence a keyed document's committed generation was built from its latest
    version, unless no job of that version completed (it failed or was cancelled: the
    previous version's index stays), and its generation, the job that began it and
    `indexed_version` name the same version. Schemas before versions have none of this."""
    if not conn.execute(
        "select exists (select 1 from pg_attribute where attrelid = 'public.documents'::regclass "
        "and attname = 'indexed_version' and not attisdropped) as present"
    ).fetchone()["present"]:
        return
    rows = conn.execute("""
        select d.id, d.version, d.indexed_version, g.document_version as generation_version,
               j.document_version as job_version,
               exists (select 1 from ingestion_jobs l where l.document_id = d.id and l.document_version = d.version
                          and l.status = 'completed' and l.stage <> 'superseded') as latest_completed
          from documents d
          join index_generations g on g.document_id = d.id and g.status = 'committed'
          left join ingestion_jobs j on j.id = g.job_id
         where d.source_key is not null and d.deleted_at is null and d.status = 'indexed'""").fetchall()
    for d in rows:
        built = d["job_version"] if d["job_version"] is not None else d["generation_version"]
        if d["latest_completed"] and built != d["version"]:
            report.flag(
                "stale_version_committed",
                f"document {d['id']} holds the index of version {built} although its latest version "
                f"{d['version']} completed",
            )
        elif not (built == d["generation_version"] == d["indexed_version"]):
            report.flag(
                "stale_version_committed",
                f"document {d['id']} indexed at version {d['indexed_version']} by a generation of version "
                f"{d['generation_version']} that a job of version {d['job_version']} built",
            )
    report.stats["indexed_at_an_older_version"] = sum(1 for d in rows if d["indexed_version"] != d["version"])


def _check_documents(conn, report: Report) -> None:
    documents = conn.execute("""
        select d.id, d.status, d.index_generation_id, d.page_count, d.section_count, d.chunk_count,
               d.source_name, s.content,
               coalesce((to_jsonb(d) ->> 'indexed_version') = (to_jsonb(d) ->> 'version'), true) as latest_indexed,
               (select count(*) from index_generations g where g.document_id = d.id and g.status = 'committed')
                   as committed,
               (select g.id from index_generations g where g.document_id = d.id and g.status = 'committed'
                 limit 1) as committed_id,
               (select count(*) from document_pages p where p.document_id = d.id
                  and p.index_generation_id = d.index_generation_id) as pages,
               (select count(*) from document_sections x where x.document_id = d.id
                  and x.index_generation_id = d.index_generation_id) as sections,
               (select count(*) from document_chunks c where c.document_id = d.id
                  and c.index_generation_id = d.index_generation_id) as chunks,
               (select coalesce(array_agg(c.content order by c.ordinal), '{}') from document_chunks c
                 where c.document_id = d.id and c.index_generation_id = d.index_generation_id) as chunk_texts
          from documents d join document_sources s on s.document_id = d.id
         where d.status = 'indexed'""").fetchall()
    report.stats["indexed"] = len(documents)
    for d in documents:
        if d["committed"] != 1 or d["index_generation_id"] is None or d["index_generation_id"] != d["committed_id"]:
            report.flag(
                "indexed_generations",
                f"document {d['id']} indexed with {d['committed']} committed generations"
                + (
                    ""
                    if d["committed"] != 1 or d["index_generation_id"] == d["committed_id"]
                    else f", pointing at {d['index_generation_id']}"
                ),
            )
            continue
        if (d["page_count"], d["section_count"], d["chunk_count"]) != (d["pages"], d["sections"], d["chunks"]):
            report.flag("counts_mismatch", f"document {d['id']} counts differ from its committed rows")
        if not d["latest_indexed"]:
            continue  # indexed at an older version, whose bytes are gone (_check_committed_versions)
        parsed = parse(bytes(d["content"]), d["source_name"], max_bytes=10_000_000)
        if [c.text for c in chunk_sections(parsed.sections)] != list(d["chunk_texts"]):
            report.flag("lost_chunks", f"document {d['id']} lost committed chunk rows")


def _check_search_term_counts(conn, report: Report) -> None:
    """The search's term counts equal the committed generations (…_bm25_search.sql, where
    the schema has them): every commit, new version, delete and purge kept them exact."""
    if conn.execute("select to_regproc('public.search_term_count_drift') is null as missing").fetchone()["missing"]:
        return
    for row in conn.execute("select * from search_term_count_drift(1000)").fetchall():
        report.flag(
            "search_term_counts_drift",
            f"term {row['lexeme']!r} of {row['collection']}: counted in {row['counted_documents']} documents and "
            f"{row['counted_chunks']} chunks, committed in {row['actual_documents']} and {row['actual_chunks']}",
        )


def _check_deletion_audit(conn, report: Report) -> None:
    """The harness's deletion audit: no build deleted under the open job that began it
    (R23's harm: a live build's generation or rows gone). Deletions made while any job
    of the document was open are counted apart (`audit.under_open_job`): the cleanup's
    delete statements check their guard on the snapshot they began with, so one that
    waited on a row lock may still remove an abandoned build's rows after a new job of
    the document opened, which harms no live build."""
    if not conn.execute("select to_regclass('public.fault_audit_deletions') is not null as present").fetchone()[
        "present"
    ]:
        report.stats["audit"] = None  # not installed: nothing to read
        return
    rows = conn.execute("""
        select relation, generation_id, document_id, job_id, generation_status, generation_token, row_count,
               open_job_id, open_job_status, open_job_token
          from fault_audit_deletions order by id""").fetchall()
    for r in rows:
        if (
            r["open_job_id"] is None
            or r["job_id"] != r["open_job_id"]
            or r["open_job_status"] != "processing"
            or (
                r["generation_token"] is not None
                and r["open_job_token"] is not None
                and r["generation_token"] != r["open_job_token"]
            )
        ):
            continue
        under = (
            f"of document {r['document_id']} deleted under its open job {r['open_job_id']} "
            f"({r['open_job_status']}, token {r['open_job_token']}), the claim that began it"
        )
        if r["relation"] == "index_generations":
            report.flag(
                "generation_deleted_under_open_job",
                f"generation {r['generation_id']} ({r['generation_status']}) {under}",
            )
        else:
            report.flag(
                "artifacts_deleted_under_open_job",
                f"{r['row_count']} {r['relation']} rows of generation {r['generation_id']} {under}",
            )
    report.stats["audit"] = {
        "generations_deleted": sum(1 for r in rows if r["relation"] == "index_generations"),
        "artifact_rows_deleted": sum(r["row_count"] for r in rows if r["relation"] != "index_generations"),
        "under_open_job": sum(1 for r in rows if r["open_job_id"] is not None),
    }


def _check_lifecycle(conn, history: list[dict], report: Report) -> None:
    """The operator's deletes and cancels against the final state: a deleted document is
    out of search and has no row left (the final janitor pass cleaned up what the delete
    did not purge at once); a batch whose cancel returned ok is `cancelled`."""
    deleted_ok = {str(e["document_id"]) for e in history if e["call"] == "delete_document" and e["ok"]}
    in_database = {
        str(r["id"])
        for r in conn.execute("select id from documents where status = 'deleted' or deleted_at is not null")
    }
    deleted = sorted(deleted_ok | in_database)
    # A delete that returned ok on a document the database does not hold deleted is caught
    # below: its source row at least is left, and its chunks are searchable if it was indexed.
    if deleted:
        committed = {
            str(r["document_id"]): r["n"]
            for r in conn.execute(
                "select document_id, count(*) as n from committed_document_chunks where document_id = any(%s::uuid[]) "
                "group by 1",
                (deleted,),
            )
        }
        found = {str(hit.document_id) for hit in search_hits(conn, SEARCH_ALL, limit=1000)}
        for document_id in deleted:
            if committed.get(document_id) or document_id in found:
                report.flag(
                    "deleted_document_searchable",
                    f"document {document_id} was deleted but has {committed.get(document_id, 0)} rows in "
                    f"committed_document_chunks{' and is found by search' if document_id in found else ''}",
                )
        left: dict[str, list[str]] = defaultdict(list)
        for table in DOCUMENT_TABLES:
            for r in conn.execute(
                f"select document_id, count(*) as n from {table} where document_id = any(%s::uuid[]) group by 1",
                (deleted,),
            ):
                left[str(r["document_id"])].append(f"{r['n']} {table}")
        for document_id, rows in sorted(left.items()):
            report.flag(
                "deleted_document_rows_left", f"document {document_id} was deleted but has rows left: {', '.join(rows)}"
            )
    cancelled_ok = {str(e["batch_id"]) for e in history if e["call"] == "cancel_batch" and e["ok"]}
    if cancelled_ok:
        for b in conn.execute(
            "select id, status from import_batches where id = any(%s::uuid[])", (sorted(cancelled_ok),)
        ):
            if b["status"] != "cancelled":
                report.flag(
                    "cancelled_batch_not_cancelled", f"batch {b['id']} was cancelled ok but is {b['status']} at the end"
                )
    operator = [e for e in history if e["call"] in OPERATOR_CALLS]
    retries = [e for e in operator if e["call"] == "retry_failed" and e["ok"]]
    report.stats["lifecycle"] = {
        "deleted_documents": len(deleted),
        "deletes_ok": sum(1 for e in operator if e["call"] == "delete_document" and e["ok"]),
        "cancels_ok": len(cancelled_ok),
        "jobs_cancelled_by_answers": sum(len(e.get("job_ids") or []) for e in operator if e["ok"]),
        "retries_ok": len(retries),
        "jobs_retried_by_answers": sum(len(e.get("retried_job_ids") or []) for e in retries),
        "retries_refused": dict(Counter(r["reason"] for e in retries for r in e.get("refused") or [])),
        "operator_call_errors": sum(1 for e in operator if e["ok"] is None),
    }
