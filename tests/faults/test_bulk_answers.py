"""Bulk acknowledgement answers, item by item, when one statement carries two claims of one
job: a thread that stalled past its lease (a zombie, token 1) and its own claim loop's new
claim of the job (token 3; one worker id never reclaims its own stale job, so another
worker took it over in between and handed it back) finish within one acknowledgement
window and go out in one `complete_many` statement. The database settles each item by its
own token (the new claim completes, the zombie is refused). When its answers named only
the job, the client (`AnySchemaRpc.complete_many`) handed both items the same answer, so one of the two
threads was told the wrong outcome. Each answer now names its item (its position in the
call) and token; the client and the history logger (rpc_log.answers_per_item) map by it."""

import pytest

from ingestion_pipeline.db.models import CompleteItem, FailItem, LeaseBeat
from tests.faults.mutation_run import Run
from tests.faults.rpc_log import read_history
from tests.helpers import make_lease_stale


@pytest.fixture
def run(db_url, tmp_path):
    made = Run(db_url, tmp_path)
    yield made
    made.close()


def zombie_and_new_claim(run: Run):
    """Claim 1 by w1 (it begins a build, then stalls), taken over by w2 and handed back
    (retry), then claim 3 by w1 again, which builds too. Both claims' (item, build)."""
    run.seed(1, batch=False)
    old = run.claim("w1")
    old_build = run.begin(old)
    assert run.write_parsed(old, old_build) is None
    make_lease_stale(run.conn, old.job_id)
    mid = run.claim("w2")
    [handed_back] = run.rpc.fail_or_retry_many(
        "w2", [FailItem(mid.job_id, mid.document_id, mid.lease_token, retry=True, stage="retry_wait")]
    )
    assert handed_back.retried
    new = run.claim("w1")
    assert (old.lease_token, mid.lease_token, new.lease_token) == (1, 2, 3)
    new_build = run.begin(new)
    assert run.write_parsed(new, new_build) is None
    return (old, old_build), (new, new_build)


@pytest.mark.parametrize("zombie_first", [True, False])
def test_each_claim_of_one_job_in_one_statement_gets_its_own_answer(run, zombie_first):
    (old, old_build), (new, new_build) = zombie_and_new_claim(run)
    zombie = CompleteItem(old.job_id, old.document_id, old.lease_token, old_build)
    holder = CompleteItem(new.job_id, new.document_id, new.lease_token, new_build)
    items = [zombie, holder] if zombie_first else [holder, zombie]
    answers = dict(
        zip(
            ("zombie", "holder") if zombie_first else ("holder", "zombie"),
            run.rpc.complete_many("w1", items),
            strict=True,
        )
    )
    job = run.conn.execute("select status, lease_token from ingestion_jobs").fetchone()
    assert (job["status"], job["lease_token"]) == ("completed", 3)  # the database got it right
    assert (answers["holder"].ok, answers["holder"].generation_id) == (True, new_build)
    assert (answers["zombie"].ok, answers["zombie"].reason) == (False, "lease_lost")


@pytest.mark.parametrize("zombie_first", [True, False])
def test_the_history_logs_each_claims_own_answer_from_one_statement(run, zombie_first):
    (old, old_build), (new, new_build) = zombie_and_new_claim(run)
    zombie = CompleteItem(old.job_id, old.document_id, old.lease_token, old_build)
    holder = CompleteItem(new.job_id, new.document_id, new.lease_token, new_build)
    run.rpc.complete_many("w1", [zombie, holder] if zombie_first else [holder, zombie])
    logged = sorted(
        (e["token"], e["ok"], e["reason"], e["generation_id"])
        for e in read_history(run.histories())
        if e["call"] == "commit_and_complete"
    )
    assert logged == [(1, False, "lease_lost", None), (3, True, None, str(new_build))]
    report = run.check()
    assert report.violations == [], report.summary()
    assert report.stats["zombie_refusals"] == 1


def test_without_a_generation_each_claims_answer_is_still_its_own(run):
    (old, _), (new, _) = zombie_and_new_claim(run)
    run.rpc.complete_many(
        "w1",
        [
            CompleteItem(old.job_id, old.document_id, old.lease_token),
            CompleteItem(new.job_id, new.document_id, new.lease_token),
        ],
    )
    logged = sorted(
        (e["token"], e["ok"], e["reason"]) for e in read_history(run.histories()) if e["call"] == "complete"
    )
    assert logged == [(1, False, "lease_lost"), (3, True, None)]
    # Nothing is accepted from the superseded token; the job's own rows are checked as ever
    # (it completed without committing a build: its document is not indexed).
    report = run.check()
    assert report.stats["superseded_token_writes"] == 0
    assert dict(report.by_rule) == {"completed_job_not_indexed": 1, "document_open_without_job": 1}, report.summary()


def test_a_heartbeat_of_both_claims_of_one_job_loses_only_the_old_one(run):
    """The worker keeps leases by job and token: its stalled thread's old lease learns it is
    lost from the same statement that renews the new claim's lease."""
    (old, _), (new, _) = zombie_and_new_claim(run)
    beat = run.rpc.heartbeat_many(
        "w1", [LeaseBeat(old.job_id, old.lease_token), LeaseBeat(new.job_id, new.lease_token)]
    )
    assert beat.renewed == 1
    assert [(ref.job_id, ref.lease_token) for ref in beat.lost] == [(old.job_id, old.lease_token)]
