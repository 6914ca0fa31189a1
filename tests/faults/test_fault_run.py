"""A bounded fault run (make test): nothing lost, nothing stuck, nothing corrupted, and no
write accepted from a superseded lease token (kills, backend terminations, pauses, stalls
of one job thread past its lease, kills of a worker holding a job on its final attempt and
a restart of the database server under the fleet, tests/faults/harness.py). The run must
also have exercised a fence (a zombie came back and was refused), a final-attempt kill
(its job dead-lettered) and a server restart (every pooled connection dead), and the
janitor must have run without an error: a run that never tests them proves nothing. The
workers acknowledge in bulk statements (each item logged as its own call) and renew all
their leases in one heartbeat statement; the batch counters must equal the job rows at the
end and never have needed the janitor's recount. The chaos also deletes documents (at
least one while a worker was building it), cancels import batches and retries failed jobs
in bulk (at least one retry that put a job back in the queue; every 15th document fails on
every attempt, so there are always failed jobs, in batches whose other jobs are being
acknowledged meanwhile) and makes new versions of documents under their keys (at least one
while its older version was being built): no older version commits after a newer one, and at
the end every indexed document holds its latest built version; no write of a cancelled (or
superseded) job accepted after the cancel returned,
no deleted document searchable or with a row left after the final pass, every batch
cancelled ok ends `cancelled` and no retry reopened one, the jobs cancelled in the
database are exactly those the calls' answers named, and no call of anyone (worker,
janitor, operator) was rolled back by a deadlock (40P01) or a serialization failure.

It runs twice: with the worker processes connected to the server, and with every
connection of theirs through a real PgBouncer in transaction mode (tests/pooler.py), where
the harness, its faults, the janitor and the checker stay on the server. Behind the pooler
the faults are the pooler's outages: a backend termination ends the server connections
that carry the worker's application_name (the one serving it, and idle ones it used last),
a server restart ends all of them (PgBouncer reconnects; its clients see an error only for
a statement or transaction in flight on one), and a SIGKILL leaves the pooler to close its
server connection if it was mid-transaction."""

import pytest

from ingestion_pipeline.db.connection import connect
from tests.faults.checker import check
from tests.faults.harness import (
    BROKEN_MARK,
    FINAL_ATTEMPT_EVERY,
    JANITOR_PASS_CALLS,
    PERMANENT_FAILURE_EVERY,
    final_attempt_outcomes,
    is_broken,
    open_jobs,
    run_faults,
)
from tests.pooler import pgbouncer

# Worker processes under faults: the client's and the workers' behaviour, run once (conftest.py).
pytestmark = pytest.mark.one_server

# Each fault kind is forced once (tests/faults/forced.py), then a random fault fires each
# time CHAOS_EVERY_JOBS more jobs ended, until CHAOS_JOBS more ended: by progress, not by the clock,
# so a slow machine sees the same faults as a fast one. Every FINAL_ATTEMPT_EVERY-th and
# PERMANENT_FAILURE_EVERY-th document leaves enough targets for the forced holds and retries.
DOCUMENTS = 360
CHAOS_JOBS = 150
CHAOS_EVERY_JOBS = 6
# The run waits for these passes (one a second), so a fast run cannot end with fewer.
MIN_JANITOR_PASSES = 10
# PgBouncer waits server_login_retry (15 s by default) after a failed server login before it
# tries again, its clients waiting meanwhile: once the restarted server is back, within a
# second here, so that the bounded run's chaos goes on after the restart.
POOLER_SETTINGS = {"server_login_retry": 1}


@pytest.fixture(params=["direct", pytest.param("pgbouncer", marks=pytest.mark.pooler)])
def worker_url(request, db_url):
    """Where the worker processes connect: the server itself, or a PgBouncer in transaction
    mode in front of it."""
    if request.param == "direct":
        yield db_url
        return
    with pgbouncer(db_url, **POOLER_SETTINGS) as pooler:
        yield pooler.url()


def test_chaos_loses_no_job_and_corrupts_no_index(db_url, worker_url, pg_server, tmp_path):
    stats = run_faults(
        db_url,
        tmp_path,
        documents=DOCUMENTS,
        workers=3,
        batches=4,
        chaos_jobs=CHAOS_JOBS,
        chaos_every_jobs=CHAOS_EVERY_JOBS,
        min_janitor_passes=MIN_JANITOR_PASSES,
        drain_timeout=120,
        worker_url=worker_url,
    )
    report = check(db_url, stats.histories)
    outcomes = final_attempt_outcomes(db_url, stats.final_attempt_jobs, stats.final_attempt_seen)
    counts = (
        f"zombie_refusals={report.stats['zombie_refusals']} final_attempt_outcomes={outcomes} "
        f"{stats.summary()}\n{report.summary()}"
    )
    print(counts)

    assert stats.kills + stats.pauses + stats.backend_terminations > 0, counts
    assert stats.stalls >= 1, counts
    assert report.stats["superseded_token_writes"] == 0, counts
    assert report.violations == [], counts
    # No statement of anyone's was rolled back (40P01, 40001): both are among the
    # violations above, and say so here.
    assert report.stats["deadlocks"] == 0 and report.stats["serialization_failures"] == 0, counts
    assert open_jobs(db_url) == 0, counts
    # A fence was exercised: some zombie came back after another claim and was refused.
    assert report.stats["zombie_refusals"] >= 1, counts
    # The janitor ran all along, its calls logged, and none of them failed (it never runs
    # while the server restarts: ServerControl.lock).
    assert stats.janitor_errors == [] and report.stats["janitor_call_errors"] == 0, counts
    assert stats.janitor_passes >= MIN_JANITOR_PASSES, counts
    assert report.stats["janitor_calls"] == (
        len(JANITOR_PASS_CALLS) * stats.janitor_passes + stats.final_cleanup_calls
    ), counts
    # The batch counters never drifted: the janitor's repair path found nothing to recount
    # (batch_drift_repaired), and every batch's counters equal its job rows at the end
    # (batch_counter_drift): both are among the violations above, and say so here.
    assert report.stats["batch_repairs"] == 0 and "batch_counter_drift" not in report.by_rule, counts
    # (Whether some statement acknowledged more than one job is timing's to decide here:
    # tests/integration/test_worker_acks.py forces that.)
    # No worker gave up: the pools replaced their dead connections after the restart.
    assert stats.worker_exits == [], counts
    # A worker was SIGKILLed holding a job on its final attempt: that job was dead-lettered
    # (by the janitor or a claim loop's expiry), never left `processing`.
    # (The operator's deletes and cancels spare those jobs.)
    assert stats.final_attempt_kills >= 1, counts
    assert outcomes == {("failed", "dead_letter"): len(stats.final_attempt_jobs)}, counts
    # The server went down under the fleet (the embedded one is restarted; the machine's
    # PostgreSQL has every backend of the database terminated instead).
    if pg_server.name == "embedded":
        assert stats.server_restarts >= 1, counts
    else:
        assert stats.all_backends_terminated >= 1, counts
    # The deletion audit was installed and read (the janitor's cleanups go through it; its
    # rule is among the violations above). A retried job is open again with the token of
    # its last claim until its next claim, so the audit's count of deletions while a job
    # of the document was open is not zero by construction any more.
    assert report.stats["audit"] is not None, counts
    # The operator's part: deletes (one at least of a document being built) and batch
    # cancels, none of their calls raised, and the database cancelled exactly the jobs
    # their answers named (each once).
    lifecycle = report.stats["lifecycle"]
    assert stats.deletes >= 1 and stats.deletes_in_flight >= 1 and stats.cancels >= 1, counts
    assert stats.operator_errors == [] and lifecycle["operator_call_errors"] == 0, counts
    assert lifecycle["deletes_ok"] == stats.deletes, counts
    assert lifecycle["cancels_ok"] == len(stats.cancelled_batches), counts  # a batch may be cancelled twice
    assert report.stats["jobs"].get("cancelled", 0) == stats.jobs_cancelled == lifecycle["jobs_cancelled_by_answers"], (
        counts
    )
    assert report.stats["batches_cancelled"] == len(stats.cancelled_batches), counts
    # Bulk retries ran, racing the acknowledgements, and put failed jobs back in the queue
    # (the history's answers and the stats agree).
    assert stats.retries >= 1 and stats.jobs_retried >= 1, counts
    assert lifecycle["retries_ok"] == stats.retries and lifecycle["jobs_retried_by_answers"] == stats.jobs_retried, (
        counts
    )
    # New versions of documents came in, one at least taking over from a build in flight
    # (its job superseded under its worker), and some were built: versions above 1 committed.
    assert stats.versions >= 1 and stats.versions_in_flight >= 1, counts
    assert any(version > 1 for version in report.stats["versions_committed"]), counts
    # A worker building a deleted document (or one of a cancelled batch) was refused.
    assert report.stats["cancel_refusals"] + report.stats["cancel_refusals_during"] >= 1, counts
    # Every job ended. Only max_attempts=1 documents (every FINAL_ATTEMPT_EVERY-th) and the
    # broken ones (every PERMANENT_FAILURE_EVERY-th, never indexed) may fail: max_attempts=10
    # outlasts this chaos. A failed job was dead-lettered (its lease expired on the final
    # attempt) or refused a retry after an error (stage `failed`: its one attempt's, or the
    # parse of a broken document); its document is `failed` (it never had a committed
    # generation) unless deleted since. Each new version added a job (new versions spare the
    # broken and the max_attempts=1 documents). By each document's last job: a cancelled one's
    # document is `cancelled` (never indexed), `indexed` (at an older version: its latest
    # version's job was cancelled with its batch) or `deleted`; a completed one's is
    # `indexed` or `deleted`.
    jobs = report.stats["jobs"]
    assert set(jobs) <= {"completed", "failed", "cancelled"}, counts
    assert sum(jobs.values()) == DOCUMENTS + stats.versions, counts
    with connect(db_url) as conn:
        failed = conn.execute(
            """
            select j.max_attempts, j.stage, j.error_message, d.status as document_status,
                   strpos(d.source_name, %s) > 0 as broken
              from ingestion_jobs j join documents d on d.id = j.document_id
             where j.status = 'failed'""",
            (BROKEN_MARK,),
        ).fetchall()
        broken = conn.execute(
            """
            select j.status as job, count(*) as n from ingestion_jobs j join documents d on d.id = j.document_id
             where strpos(d.source_name, %s) > 0 group by 1""",
            (BROKEN_MARK,),
        ).fetchall()
        final_documents = conn.execute("select count(*) as n from ingestion_jobs where max_attempts = 1").fetchone()[
            "n"
        ]
        pairs = {
            (r["job"], r["document"]): r["n"]
            for r in conn.execute("""
            select l.status as job, d.status as document, count(*) as n
              from documents d
              join lateral (select j.status from ingestion_jobs j where j.document_id = d.id
                             order by j.created_at desc, j.id desc limit 1) l on true
             group by 1, 2""")
        }
    assert final_documents == len(range(0, DOCUMENTS, FINAL_ATTEMPT_EVERY)), counts
    assert sum(r["n"] for r in broken) == sum(
        is_broken(n, PERMANENT_FAILURE_EVERY, FINAL_ATTEMPT_EVERY) for n in range(DOCUMENTS)
    ), (broken, counts)
    assert {r["job"] for r in broken} <= {"failed", "cancelled"}, (broken, counts)  # never indexed
    assert all(f["max_attempts"] == 1 or f["broken"] for f in failed), (failed, counts)
    assert all(f["stage"] == "failed" for f in failed if f["broken"]), (failed, counts)
    assert all(f["stage"] in ("dead_letter", "failed") for f in failed), (failed, counts)
    assert all(f["document_status"] in ("failed", "deleted") for f in failed), (failed, counts)
    assert len(failed) == jobs.get("failed", 0), counts
    assert set(pairs) <= {
        ("completed", "indexed"),
        ("completed", "deleted"),
        ("failed", "failed"),
        ("failed", "deleted"),
        ("cancelled", "cancelled"),
        ("cancelled", "indexed"),
        ("cancelled", "deleted"),
    }, (pairs, counts)
    assert (
        pairs.get(("completed", "deleted"), 0)
        + pairs.get(("failed", "deleted"), 0)
        + pairs.get(("cancelled", "deleted"), 0)
        == lifecycle["deleted_documents"]
        == stats.deletes
    ), (pairs, counts)
    expected = {
        "indexed": pairs.get(("completed", "indexed"), 0) + pairs.get(("cancelled", "indexed"), 0),
        "failed": pairs.get(("failed", "failed"), 0),
        "cancelled": pairs.get(("cancelled", "cancelled"), 0),
    }
    assert report.stats["documents"] == {k: n for k, n in expected.items() if n}, (pairs, counts)
    assert report.stats["indexed"] == expected["indexed"], counts
