"""The checker's history rules on small hand-written histories (no database): a write
accepted from a superseded token is counted and flagged, the worker-id rule still applies
where the history has no tokens, and refusals or writes before the takeover are not."""

from tests.faults.checker import Report, _check_history

JOB = "job-1"


def claim(worker, token, t0):
    return {"call": "claim", "worker": worker, "job_id": JOB, "token": token, "t0": t0, "t1": t0 + 0.01, "ok": True}


def write(call, worker, token, t0, ok=True, **extra):
    return {"call": call, "worker": worker, "job_id": JOB, "token": token, "t0": t0, "t1": t0 + 0.01, "ok": ok,
            "reason": None if ok else "lease_lost", **extra}


def checked(*entries) -> Report:
    report = Report()
    _check_history(sorted(entries, key=lambda e: e["t0"]), report)
    return report


def test_a_write_accepted_from_a_superseded_token_is_counted_and_flagged():
    report = checked(claim("w1", 1, 0), claim("w2", 2, 5), write("write", "w1", 1, 6),
                     write("commit_and_complete", "w2", 2, 7))
    assert report.stats["superseded_token_writes"] == 1
    assert report.violations == [f"write by w1 on job {JOB} accepted with token 1 after w2 had claimed it with token 2"]


def test_one_worker_id_claiming_again_does_not_hide_its_superseded_token():
    report = checked(claim("w1", 1, 0), claim("w1", 3, 5), write("commit_and_complete", "w1", 1, 6))
    assert report.stats["superseded_token_writes"] == 1
    assert len(report.violations) == 1


def test_refused_writes_and_writes_before_the_takeover_returned_are_fine():
    report = checked(claim("w1", 1, 0), write("write", "w1", 1, 4.995), claim("w2", 2, 4.99),
                     write("write", "w1", 1, 6, ok=False, sqlstate="IF001"),
                     write("commit_and_complete", "w1", 1, 6.5, ok=False),
                     write("record_stage", "w2", 2, 8), write("commit_and_complete", "w2", 2, 9))
    assert report.stats["superseded_token_writes"] == 0
    assert report.violations == []


def test_without_tokens_the_worker_id_rule_applies():
    report = checked(claim("w1", None, 0), claim("w2", None, 5), write("write", "w1", None, 6),
                     write("heartbeat", "w1", None, 6.5, fenced=False))  # an unfenced no-op writes nothing
    assert report.stats["superseded_token_writes"] == 0
    assert report.violations == [f"write by w1 on job {JOB} accepted after w2 had claimed it"]
