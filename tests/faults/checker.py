"""Checks a fault run, in the spirit of Jepsen's total-queue: from the client-side history
of every RPC and the final database state, after draining.

Violations (never expected): a lost job; a batch not terminal or with counts unlike its
jobs; two ok completions of one job; a write accepted from a caller that had lost its
lease; an indexed document without exactly one committed generation whose rows match its
counts (and its source); a build deleted under an open job. Redeliveries (a job claimed
more than once) are expected under faults and reported apart.

A write (an RPC that changes state, or an artifact write) has lost its lease when a newer
claim of its job had already returned when it began. With lease tokens that is exact: the
write carries a token lower than that of a claim whose call had ended before the write
began (`superseded_token_writes`; each is also a violation). Without tokens (schemas before
the lease-token migration) the history can only compare worker ids: the write's worker is
not the one of the last claim returned. A worker id reused by one claim loop is invisible
to that check; the token check sees it."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import chunk_sections, parse
from tests.faults.rpc_log import read_history

WRITES = {"commit", "complete", "commit_and_complete", "fail_or_retry", "heartbeat", "record_stage",
          "begin_generation", "write"}
COMPLETIONS = {"complete", "commit_and_complete"}
COMMITS = {"commit", "commit_and_complete"}
# An artifact write refused: the artifact fence (IF001), or the generation was already
# cleaned up under a zombie whose job had completed since (23503).
REFUSED_WRITES = {"IF001", "23503"}
# Unfenced fallbacks for RPCs the old schema lacks write nothing at all.
NO_OP_WHEN_UNFENCED = {"heartbeat", "record_stage"}


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    redeliveries: int = 0
    stats: dict = field(default_factory=dict)

    def summary(self) -> str:
        shown = "\n  ".join(self.violations[:20])
        return (f"{self.stats} redeliveries={self.redeliveries} violations={len(self.violations)}"
                + (f"\n  {shown}" if shown else ""))


def check(url: str, history_paths) -> Report:
    history = read_history(history_paths)
    report = Report()
    _check_history(history, report)
    with connect(url) as conn:
        _check_jobs_and_batches(conn, report)
        _check_documents(conn, report)
    claims = Counter(e["job_id"] for e in history if e["call"] == "claim")
    report.redeliveries = sum(n - 1 for n in claims.values() if n > 1)
    writes = [e for e in history if e["call"] == "write"]
    report.stats.update(calls=len(history), claims=sum(claims.values()),
                        stalls=sum(1 for e in history if e["call"] == "stall"),
                        artifact_writes=len(writes),
                        # by SQLSTATE: IF001 the artifact fence, 23503 a generation already cleaned up
                        artifact_writes_refused=dict(Counter(e["sqlstate"] for e in writes
                                                             if e.get("sqlstate") in REFUSED_WRITES)))
    return report


def _check_history(history: list[dict], report: Report) -> None:
    completions = Counter(e["job_id"] for e in history if e["call"] in COMPLETIONS and e["ok"])
    for job_id, count in completions.items():
        if count > 1:
            report.violations.append(f"job {job_id} completed ok {count} times")

    claims_by_job: dict[str, list[dict]] = defaultdict(list)
    for entry in history:
        if entry["call"] == "claim":
            claims_by_job[entry["job_id"]].append(entry)
    superseded = 0
    for entry in history:
        if entry["call"] not in WRITES or not entry["ok"]:
            continue
        if entry["call"] in NO_OP_WHEN_UNFENCED and not entry.get("fenced", True):
            continue
        before = [c for c in claims_by_job.get(entry["job_id"], []) if c["t1"] < entry["t0"]]
        if not before:
            continue
        if entry.get("token") is not None:
            # The claims that had returned when this write began: none may hold a newer token.
            newest = max(before, key=lambda c: c.get("token") or 0)
            if (newest.get("token") or 0) > entry["token"]:
                superseded += 1
                report.violations.append(
                    f"{entry['call']} by {entry['worker']} on job {entry['job_id']} accepted with token "
                    f"{entry['token']} after {newest['worker']} had claimed it with token {newest['token']}")
        # Without a token: the holder when this write began is the last claim that had returned.
        elif before[-1]["worker"] != entry["worker"]:
            report.violations.append(
                f"{entry['call']} by {entry['worker']} on job {entry['job_id']} accepted after "
                f"{before[-1]['worker']} had claimed it")
    report.stats["superseded_token_writes"] = superseded
    for entry in history:
        if entry["call"] in COMMITS and not entry["ok"] and entry.get("reason") == "generation_not_found":
            report.violations.append(f"build of job {entry['job_id']} was deleted under an open job")


def _check_jobs_and_batches(conn, report: Report) -> None:
    rows = conn.execute("select status, count(*) as n from ingestion_jobs group by status").fetchall()
    report.stats["jobs"] = {r["status"]: r["n"] for r in rows}
    for row in conn.execute("select id from ingestion_jobs where status in ('pending', 'processing')"):
        report.violations.append(f"job {row['id']} lost: never reached a terminal state")
    batches = conn.execute("""
        select b.id, b.status, b.total_files, b.completed_files, b.failed_files,
               count(j.id) as jobs,
               count(j.id) filter (where j.status = 'completed') as completed,
               count(j.id) filter (where j.status = 'failed') as failed
          from import_batches b left join ingestion_jobs j on j.batch_id = b.id
         group by b.id""").fetchall()
    for b in batches:
        expected = "completed_with_errors" if b["failed"] else "completed"
        if b["jobs"] and (b["status"] != expected or (b["total_files"], b["completed_files"], b["failed_files"])
                          != (b["jobs"], b["completed"], b["failed"])):
            report.violations.append(
                f"batch {b['id']} is {b['status']} {b['total_files']}/{b['completed_files']}/{b['failed_files']}"
                f" but its jobs say {expected} {b['jobs']}/{b['completed']}/{b['failed']}")


def _check_documents(conn, report: Report) -> None:
    documents = conn.execute("""
        select d.id, d.status, d.index_generation_id, d.page_count, d.section_count, d.chunk_count,
               d.source_name, s.content,
               (select count(*) from index_generations g where g.document_id = d.id and g.status = 'committed')
                   as committed,
               (select count(*) from document_pages p where p.document_id = d.id
                  and p.index_generation_id = d.index_generation_id) as pages,
               (select count(*) from document_sections x where x.document_id = d.id
                  and x.index_generation_id = d.index_generation_id) as sections,
               (select count(*) from document_chunks c where c.document_id = d.id
                  and c.index_generation_id = d.index_generation_id) as chunks
          from documents d join document_sources s on s.document_id = d.id
         where d.status = 'indexed'""").fetchall()
    report.stats["indexed"] = len(documents)
    for d in documents:
        if d["committed"] != 1 or d["index_generation_id"] is None:
            report.violations.append(f"document {d['id']} indexed with {d['committed']} committed generations")
            continue
        if (d["page_count"], d["section_count"], d["chunk_count"]) != (d["pages"], d["sections"], d["chunks"]):
            report.violations.append(f"document {d['id']} counts differ from its committed rows")
        parsed = parse(bytes(d["content"]), d["source_name"], max_bytes=10_000_000)
        if len(chunk_sections(parsed.sections)) != d["chunks"]:
            report.violations.append(f"document {d['id']} lost committed chunk rows")
