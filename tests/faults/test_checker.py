"""The checker's history rules on small hand-written histories (no database): each rule
fires on a history with exactly its violation (a write accepted from a superseded token,
the worker-id rule where the history has no tokens, a double completion, a write accepted
after the janitor expired the job, a build gone at commit, an older version committed after a
newer one, a batch the janitor had to
recount, a retry that reopened a cancelled batch, a statement rolled back by a deadlock or
a serialization failure), and refusals, writes before the takeover and writes of a later
claim are not flagged. The database-side rules: test_checker_mutations.py."""

import psycopg
import pytest

from tests.faults.checker import Report, _check_history
from tests.faults.rpc_log import rolled_back

JOB = "job-1"


def claim(worker, token, t0):
    return {"call": "claim", "worker": worker, "job_id": JOB, "token": token, "t0": t0, "t1": t0 + 0.01, "ok": True}


def write(call, worker, token, t0, ok=True, **extra):
    return {
        "call": call,
        "worker": worker,
        "job_id": JOB,
        "token": token,
        "t0": t0,
        "t1": t0 + 0.01,
        "ok": ok,
        "reason": None if ok else "lease_lost",
        **extra,
    }


def expire(t0, job_ids=(JOB,)):
    return {
        "call": "expire_stale",
        "worker": "janitor",
        "job_id": None,
        "token": None,
        "t0": t0,
        "t1": t0 + 0.01,
        "ok": True,
        "reason": None,
        "expired": len(job_ids),
        "job_ids": list(job_ids),
    }


def checked(*entries) -> Report:
    report = Report()
    _check_history(sorted(entries, key=lambda e: e["t0"]), report)
    return report


def test_a_write_accepted_from_a_superseded_token_is_counted_and_flagged():
    report = checked(
        claim("w1", 1, 0), claim("w2", 2, 5), write("write", "w1", 1, 6), write("commit_and_complete", "w2", 2, 7)
    )
    assert report.stats["superseded_token_writes"] == 1
    assert report.violations == [f"write by w1 on job {JOB} accepted with token 1 after w2 had claimed it with token 2"]
    assert report.by_rule == {"superseded_token_write": 1}


def test_one_worker_id_claiming_again_does_not_hide_its_superseded_token():
    report = checked(claim("w1", 1, 0), claim("w1", 3, 5), write("commit_and_complete", "w1", 1, 6))
    assert report.stats["superseded_token_writes"] == 1
    assert report.by_rule == {"superseded_token_write": 1}


def test_refused_writes_and_writes_before_the_takeover_returned_are_fine():
    report = checked(
        claim("w1", 1, 0),
        write("write", "w1", 1, 4.995),
        claim("w2", 2, 4.99),
        write("write", "w1", 1, 6, ok=False, sqlstate="IF001"),
        write("commit_and_complete", "w1", 1, 6.5, ok=False),
        write("record_stage", "w2", 2, 8),
        write("commit_and_complete", "w2", 2, 9),
    )
    assert report.stats["superseded_token_writes"] == 0
    assert report.violations == []
    # Both refusals came after w2's claim: the zombie w1 was fenced out twice.
    assert report.stats["zombie_refusals"] == 2


def test_only_refusals_after_another_claim_count_as_zombie_refusals():
    report = checked(
        claim("w1", 1, 0),
        write("heartbeat", "w1", 1, 1, ok=False),  # no other claim yet: not a zombie's refusal
        write("write", "w1", 1, 2, ok=False, reason="lease_lost_client"),  # the client stopped itself
        claim("w2", 2, 5),
        write("write", "w1", 1, 6, ok=False, reason="lease_lost_client"),  # never reached the database
        write("write", "w1", 1, 6.2, ok=False, sqlstate="23503"),  # its build cleaned up: refused
        write("heartbeat", "w1", 1, 6.5, ok=False),  # refused by the token fence
        write("complete", "w2", 2, 7, ok=False, reason="not_open"),
    )  # not a lease refusal
    assert report.violations == []
    assert report.stats["zombie_refusals"] == 2


def test_without_tokens_the_worker_id_rule_applies():
    report = checked(
        claim("w1", None, 0),
        claim("w2", None, 5),
        write("write", "w1", None, 6),
        write("heartbeat", "w1", None, 6.5, fenced=False),
    )  # an unfenced no-op writes nothing
    assert report.stats["superseded_token_writes"] == 0
    assert report.violations == [f"write by w1 on job {JOB} accepted after w2 had claimed it"]
    assert report.by_rule == {"write_after_takeover": 1}


def test_a_job_completed_ok_twice_is_flagged():
    report = checked(
        claim("w1", 1, 0), write("commit_and_complete", "w1", 1, 1), write("complete", "w1", 1, 2)
    )  # the same claim: no takeover, still two completions
    assert report.violations == [f"job {JOB} completed ok 2 times"]
    assert report.by_rule == {"double_completion": 1}


def test_a_write_accepted_after_the_janitor_expired_the_job_is_flagged():
    report = checked(claim("w1", 1, 0), expire(5), write("write", "w1", 1, 6), write("fail_or_retry", "w1", 1, 6.5))
    assert report.by_rule == {"write_after_expiry": 2}, report.violations
    assert report.violations[0] == (
        f"write by w1 on job {JOB} (token 1) accepted after the janitor had expired the job"
    )


def test_a_write_accepted_after_expiry_is_flagged_without_tokens_too():
    report = checked(claim("w1", None, 0), expire(5), write("commit", "w1", None, 6))
    assert report.by_rule == {"write_after_expiry": 1}, report.violations


def test_writes_before_the_expiry_returned_or_from_a_later_claim_are_fine():
    report = checked(
        claim("w1", 1, 0),
        write("write", "w1", 1, 4.999),  # began before the expiry returned
        expire(5),
        write("heartbeat", "w1", 1, 6, ok=False),  # refused: fine
        claim("w1", 2, 8),  # after an operator retry: a new claim, after the expiry
        write("commit_and_complete", "w1", 2, 9),
        expire(10, job_ids=("another-job",)),
    )
    assert report.violations == []


def test_a_build_gone_at_commit_is_flagged():
    report = checked(
        claim("w1", 1, 0),
        write("begin_generation", "w1", 1, 1),
        write("commit_and_complete", "w1", 1, 2, ok=False, reason="generation_not_found"),
    )
    assert report.violations == [f"build of job {JOB} was deleted under an open job"]
    assert report.by_rule == {"generation_not_found": 1}


def refresh(call, t0, batches, worker="janitor"):
    return {
        "call": call,
        "worker": worker,
        "job_id": None,
        "token": None,
        "t0": t0,
        "t1": t0 + 0.01,
        "ok": True,
        "reason": None,
        "refreshed": len(batches),
        "batches": batches,
    }


def test_a_batch_the_janitor_recounted_had_drifted_and_is_flagged():
    batch = {"batch_id": "batch-1", "status": "completed", "total": 3, "open": 0, "completed": 3, "failed": 0}
    report = checked(
        refresh("refresh_stuck_batches", 1, []),
        refresh("refresh_drifted_batches", 1.1, [batch]),
        refresh("refresh_stuck_batches", 2, [batch]),
        refresh("refresh_drifted_batches", 2.1, []),
    )
    assert report.by_rule == {"batch_drift_repaired": 2}, report.violations
    assert report.violations[0] == (
        "refresh_drifted_batches by janitor recounted batch batch-1 (now completed "
        "total/open/completed/failed 3/0/3/0): its counters had drifted from its jobs"
    )
    assert report.stats["batch_repairs"] == 2


def test_a_stuck_batch_without_jobs_and_a_failed_refresh_are_not_drift():
    empty = {"batch_id": "batch-2", "status": "completed", "total": 0, "open": 0, "completed": 0, "failed": 0}
    failed = {**refresh("refresh_drifted_batches", 2, []), "ok": None, "error": "OperationalError: gone"}
    report = checked(refresh("refresh_stuck_batches", 1, [empty]), failed)
    assert report.violations == [] and report.stats["batch_repairs"] == 0


# -- the operator's deletes and batch cancels ---------------------------------------------


def cancel(call, t0, job_ids=(JOB,), ok=True):
    target = {"document_id": "doc-1"} if call == "delete_document" else {"batch_id": "batch-1"}
    return {
        "call": call,
        "worker": "operator",
        "job_id": None,
        "token": None,
        "t0": t0,
        "t1": t0 + 0.01,
        "ok": ok,
        "reason": None if ok else "nothing_open",
        "job_ids": list(job_ids) if ok else [],
        **target,
    }


def test_a_write_accepted_after_a_delete_cancelled_the_job_is_flagged():
    report = checked(
        claim("w1", 1, 0),
        write("begin_generation", "w1", 1, 1),
        cancel("delete_document", 5),
        write("write", "w1", 1, 6),
        write("commit_and_complete", "w1", 1, 7),
    )
    assert report.by_rule == {"write_after_cancel": 2}, report.violations
    assert report.violations[0] == (
        f"job {JOB} write accepted (by w1, token 1) after delete_document of doc-1 had cancelled it"
    )


def test_a_claim_or_a_heartbeat_after_a_batch_cancel_is_flagged():
    report = checked(claim("w1", 1, 0), cancel("cancel_batch", 5), write("heartbeat", "w1", 1, 6), claim("w2", 2, 7))
    assert report.by_rule == {"write_after_cancel": 2}, report.violations
    assert report.violations[1] == f"job {JOB} claimed (by w2, token 2) after cancel_batch of batch-1 had cancelled it"


def test_refusals_after_a_cancel_and_writes_before_it_returned_are_fine():
    report = checked(
        claim("w1", 1, 0),
        write("write", "w1", 1, 5.005),  # began before the cancel returned
        cancel("cancel_batch", 5),
        write("heartbeat", "w1", 1, 6, ok=False),  # the fence: lease_lost
        write("write", "w1", 1, 6.1, ok=False, reason="lease_lost", sqlstate="IF001"),
        write("commit_and_complete", "w1", 1, 7, ok=False),
        cancel("cancel_batch", 8, ok=False),  # nothing open: cancelled nothing
        claim("w2", 1, 9.0) | {"job_id": "another-job"},
        cancel("delete_document", 10, job_ids=()),  # an indexed document: no job to cancel
        write("heartbeat", "w2", 1, 11) | {"job_id": "another-job"},
    )
    assert report.violations == [], report.violations
    assert report.stats["cancel_refusals"] == 3
    assert report.stats["zombie_refusals"] == 0  # no takeover, no expiry: the cancel's refusals, counted apart


def test_a_call_under_way_while_the_cancel_ran_is_a_refusal_during_it_never_a_violation():
    report = checked(
        claim("w1", 1, 0),
        write("commit_and_complete", "w1", 1, 4.9) | {"t1": 5.02, "ok": False, "reason": "lease_lost"},
        cancel("cancel_batch", 5),
        write("heartbeat", "w1", 1, 6, ok=False),
    )
    assert report.violations == []
    assert (report.stats["cancel_refusals"], report.stats["cancel_refusals_during"]) == (1, 1)


# -- the operator's retries ------------------------------------------------------------------


def retry(t0, retried_batches, mode="all"):
    return {
        "call": "retry_failed",
        "worker": "operator",
        "job_id": None,
        "token": None,
        "t0": t0,
        "t1": t0 + 0.01,
        "ok": True,
        "reason": None,
        "mode": mode,
        "batch_id": None,
        "requested_job_ids": None,
        "retried": len(retried_batches),
        "retried_job_ids": list(retried_batches),
        "retried_batches": retried_batches,
        "refused": [],
        "job_ids": [],
    }


def test_a_retry_that_reopened_a_cancelled_batch_is_flagged():
    report = checked(
        retry(1, {"job-0": "batch-1"}),  # before the cancel: fine
        cancel("cancel_batch", 5, job_ids=("job-2",)),
        retry(6, {JOB: "batch-1", "job-3": "batch-2"}, mode="jobs"),
        cancel("cancel_batch", 8, ok=False),
    )  # refused: cancelled nothing more
    assert report.by_rule == {"retry_reopened_cancelled_batch": 1}, report.violations
    assert report.violations == [
        f"retry_failed (jobs) put job {JOB} back in the queue, of batch batch-1 which cancel_batch had cancelled before"
    ]
    # A retry cancels nothing: its jobs are no cancelled jobs (no write_after_cancel).
    assert report.stats["cancel_refusals"] == 0


# -- rollbacks: deadlocks and serialization failures --------------------------------------------


def rollback(worker, sqlstate, t0, rpc="rpc_complete_many", job_ids=(JOB,)):
    return {
        "call": "rollback",
        "rpc": rpc,
        "worker": worker,
        "job_id": None,
        "job_ids": list(job_ids),
        "token": None,
        "t0": t0,
        "t1": t0 + 0.1,
        "ok": None,
        "reason": None,
        "sqlstate": sqlstate,
        "error": "DeadlockDetected: deadlock detected" if sqlstate == "40P01" else "SerializationFailure: x",
    }


def test_every_rollback_of_anyone_is_a_violation_and_counted():
    """A worker's acknowledgement, the operator's retry and the janitor's expiry rolled back
    by a deadlock, an artifact write by a serialization failure: four violations. The
    operator's own error entry for its call (no sqlstate) is the same rollback: not counted
    again."""
    operator_error = {**retry(2, {}), "ok": None, "error": "DeadlockDetected: deadlock detected"}
    report = checked(
        claim("w1", 1, 0),
        rollback("w1", "40P01", 1),
        rollback("operator", "40P01", 2, rpc="rpc_retry_failed", job_ids=()),
        operator_error,
        rollback("janitor", "40P01", 3, rpc="rpc_expire_stale", job_ids=()),
        write("write", "w1", 1, 4, ok=False, reason="SerializationFailure: x", sqlstate="40001"),
        write("write", "w1", 1, 5, ok=False, sqlstate="IF001"),
    )  # the fence: no rollback
    assert report.by_rule == {"deadlock": 3, "serialization_failure": 1}, report.violations
    assert (report.stats["deadlocks"], report.stats["serialization_failures"]) == (3, 1)
    assert report.stats["rollbacks_by_caller"] == {
        "worker 40P01": 1,
        "operator 40P01": 1,
        "janitor 40P01": 1,
        "worker 40001": 1,
    }
    assert report.violations[0] == (
        f"rpc_complete_many by w1 (jobs {JOB}) got 40P01: DeadlockDetected: deadlock detected"
    )
    assert report.violations[1] == "rpc_retry_failed by operator got 40P01: DeadlockDetected: deadlock detected"


def test_a_history_without_rollbacks_counts_none():
    report = checked(claim("w1", 1, 0), write("commit_and_complete", "w1", 1, 1))
    assert report.violations == []
    assert (report.stats["deadlocks"], report.stats["serialization_failures"]) == (0, 0)


@pytest.mark.parametrize(
    ("error", "sqlstate"),
    [
        (psycopg.errors.DeadlockDetected("deadlock detected"), "40P01"),
        (psycopg.errors.SerializationFailure("could not serialize access"), "40001"),
        (psycopg.errors.LockNotAvailable("could not obtain lock"), None),  # 55P03: no rollback of the server's
        (psycopg.OperationalError("server closed the connection"), None),
        (TimeoutError(), None),
    ],
)
def test_which_errors_are_rollbacks(error, sqlstate):
    assert rolled_back(error) == sqlstate


def version_claim(job_id, version, t0, worker="w1"):
    return {**claim(worker, 1, t0), "job_id": job_id, "document_id": "doc-1", "version": version}


def version_commit(job_id, t0, ok=True, worker="w1"):
    return {**write("commit_and_complete", worker, 1, t0, ok=ok), "job_id": job_id}


def test_an_older_version_committed_after_a_newer_one_is_flagged():
    report = checked(
        version_claim("job-v1", 1, 0),
        version_claim("job-v2", 2, 1, worker="w2"),
        version_commit("job-v2", 2, worker="w2"),
        version_commit("job-v1", 3),
    )
    assert dict(report.by_rule) == {"older_version_committed_after_newer": 1}
    assert report.violations[0] == (
        "commit_and_complete of version 1 of document doc-1 (job job-v1, by w1) accepted after version 2 had "
        "committed (job job-v2)"
    )
    assert report.stats["versions_committed"] == {1: 1, 2: 1}


def test_versions_committed_in_order_or_refused_or_overlapping_are_fine():
    report = checked(
        version_claim("job-v1", 1, 0),
        version_commit("job-v1", 1),  # version 1 first, then 2
        version_claim("job-v2", 2, 2, worker="w2"),
        version_commit("job-v2", 3, worker="w2"),
        version_claim("job-v1b", 1, 4),
        version_commit("job-v1b", 5, ok=False),  # an older build refused after 2 committed
        version_claim("job-v3", 3, 6, worker="w2"),
        version_commit("job-v3", 7.000, worker="w2"),
        version_claim("job-v2b", 2, 6.5),
        version_commit("job-v2b", 7.005),  # began before 3's commit had returned: no order to break
    )
    assert report.violations == [], report.summary()
