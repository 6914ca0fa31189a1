"""Mutation runs: the checker against a real database with exactly one fault injected, by
a direct SQL write from the test, a sequence of real RPC calls that a schema before the
fix accepts, or (for the deletion audit) the R23 race on the pre-hardening schema, or (for
the rollback rules) a deadlock forced on a logged worker's acknowledgement by row locks
taken from the test. Each test asserts the rule it targets fires (and which others the
fault drags along); a control run finds nothing (one for the operator's deletes and batch
cancels, one for its retries too). The history-only rules: test_checker.py."""

import psycopg
import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.models import CompleteItem, FailItem, LeaseBeat
from tests.any_schema_rpc import AnySchemaRpc
from tests.faults.checker import check
from tests.faults.harness import ChaosStats, Janitor, install_deletion_audit
from tests.faults.mutation_run import Run
from tests.faults.rpc_log import DEADLOCK, OPERATOR, HistoryFile, LoggedRpc, read_history
from tests.helpers import (
    Background,
    backend_pid,
    index_document,
    make_lease_stale,
    seed_document,
    seed_job,
    start_reindex_build,
    wait_until_blocked,
)


@pytest.fixture
def run(db_url, tmp_path):
    made = Run(db_url, tmp_path)
    yield made
    made.close()


def fired(report) -> dict:
    return dict(report.by_rule)


def test_control_a_clean_run_has_no_violation(run):
    run.seed(3)
    run.drain()
    report = run.check()
    assert report.violations == [], report.summary()
    assert report.stats["documents"] == {"indexed": 3} and report.stats["jobs"] == {"completed": 3}
    # The worker acknowledged in bulk statements; each item is in the history as the call
    # it replaces, with its own token and answer.
    completions = [e for e in read_history(run.histories()) if e["call"] == "commit_and_complete"]
    assert sorted((e["ok"], e["reason"]) for e in completions) == [(True, None)] * 3, completions
    assert all(e["token"] == 1 and e["worker"] and e.get("bulk") and e["chunk_count"] for e in completions)
    assert report.stats["bulk_acks"]["items"] == 3, report.summary()


def test_bulk_statements_are_logged_one_entry_per_item(run):
    """complete_many, fail_or_retry_many and heartbeat_many: one history entry per item,
    named as the single call it replaces, each with its own token and answer, so a zombie's
    item refused inside a statement that settles the others counts as a refusal."""
    run.seed(3, batch=False)
    a, b, c = sorted(run.rpc.claim("w1", limit=3), key=lambda job: str(job.job_id))
    make_lease_stale(run.conn, b.job_id)
    [taken] = run.rpc.claim("w2")  # b, taken over: w1 is a zombie on it
    assert (taken.job_id, taken.lease_token) == (b.job_id, 2)
    beat = run.rpc.heartbeat_many("w1", [LeaseBeat(j.job_id, j.lease_token) for j in (a, b, c)])
    assert [(ref.job_id, ref.lease_token) for ref in beat.lost] == [(b.job_id, b.lease_token)]
    generation_id = run.begin(a)
    assert run.write_parsed(a, generation_id) is None
    done = run.rpc.complete_many(
        "w1",
        [
            CompleteItem(b.job_id, b.document_id, b.lease_token),
            CompleteItem(a.job_id, a.document_id, a.lease_token, generation_id),
        ],
    )
    assert [(d.ok, d.reason) for d in done] == [(False, "lease_lost"), (True, None)]
    failed = run.rpc.fail_or_retry_many("w1", [FailItem(c.job_id, c.document_id, c.lease_token, retry=False)])
    assert failed[0].ok and failed[0].retried is False
    assert run.rpc.fail_or_retry_many("w2", [FailItem(b.job_id, b.document_id, taken.lease_token)])[0].ok

    history = read_history(run.histories())
    logged = [
        (e["call"], e["worker"], e["job_id"], e["token"], e["ok"], e["reason"])
        for e in history
        if e["call"] not in ("claim", "begin_generation", "write")
    ]
    by_id = {str(a.job_id): "a", str(b.job_id): "b", str(c.job_id): "c"}
    assert sorted(
        (call, worker, by_id[job], token, ok, reason) for call, worker, job, token, ok, reason in logged
    ) == sorted(
        [
            ("heartbeat", "w1", "a", 1, True, None),
            ("heartbeat", "w1", "b", 1, False, "lease_lost"),
            ("heartbeat", "w1", "c", 1, True, None),
            ("complete", "w1", "b", 1, False, "lease_lost"),
            ("commit_and_complete", "w1", "a", 1, True, None),
            ("fail_or_retry", "w1", "c", 1, True, None),
            ("fail_or_retry", "w2", "b", 2, True, None),
        ]
    )
    [commit] = [e for e in history if e["call"] == "commit_and_complete"]
    assert commit["generation_id"] == str(generation_id) and commit["chunk_count"] > 0
    assert [e["retried"] for e in history if e["call"] == "fail_or_retry"] == [False, False]
    statements = {tuple(e["bulk"]) for e in history if e.get("bulk")}
    assert sorted(n for _, n in statements) == [1, 1, 2, 3]
    report = run.check()
    assert report.violations == [], report.summary()
    assert report.stats["zombie_refusals"] == 2  # w1's heartbeat and completion of b
    assert report.stats["bulk_acks"] == {"statements": 3, "items": 4, "largest": 2}


def test_a_completion_accepted_from_a_superseded_token_inside_a_bulk_statement(run):
    """The history side of the rule, on a bulk entry: were the database to accept an item
    of a zombie (here its token is rewritten under it, as a broken fence would), the
    per-item entry shows a superseded token that was accepted."""
    run.seed(1, batch=False)
    [old] = run.rpc.claim("w1")
    make_lease_stale(run.conn, old.job_id)
    [_new] = run.rpc.claim("w2")
    run.conn.execute("update ingestion_jobs set lease_token = %s where id = %s", (old.lease_token, old.job_id))
    [done] = run.rpc.complete_many("w1", [CompleteItem(old.job_id, old.document_id, old.lease_token)])
    assert done.ok
    report = run.check()
    assert fired(report) == {
        "superseded_token_write": 1,
        "completed_job_not_indexed": 1,
        "document_open_without_job": 1,
    }, report.summary()  # completed with nothing built
    assert report.violations[0].startswith(f"complete by w1 on job {old.job_id} accepted with token 1 after w2")


# -- jobs and batches -------------------------------------------------------------------


def test_lost_job(run):
    run.seed(1, batch=False)  # enqueued, never processed
    assert fired(run.check()) == {"lost_job": 1}


def test_batch_not_terminal(run):
    run.seed(2)
    run.drain()
    run.conn.execute("update import_batches set status = 'processing'")
    assert fired(run.check()) == {"batch_mismatch": 1, "batch_counter_drift": 1}


def test_batch_counts_unlike_its_jobs(run):
    run.seed(2)
    run.drain()
    run.conn.execute("update import_batches set completed_files = completed_files - 1")
    assert fired(run.check()) == {"batch_mismatch": 1, "batch_counter_drift": 1}


# -- batch counters ---------------------------------------------------------------------

BATCH_COUNTERS = "select status, total_files, open_files, completed_files, failed_files from import_batches"


@pytest.mark.parametrize(
    ("corruption", "also", "repaired_by"),
    [
        # Only the counter rule sees it: the status and the three older counts are right.
        ("open_files = open_files + 1", {}, "refresh_drifted_batches"),
        ("total_files = total_files + 1", {"batch_mismatch": 1}, "refresh_drifted_batches"),
        ("failed_files = failed_files + 1", {"batch_mismatch": 1}, "refresh_drifted_batches"),
        # Counters that say a job is open, and the status with them: a stuck batch.
        (
            "open_files = 1, completed_files = completed_files - 1, status = 'processing'",
            {"batch_mismatch": 1},
            "refresh_stuck_batches",
        ),
    ],
)
def test_a_drifted_batch_counter_is_caught_and_the_janitor_heals_it(run, corruption, also, repaired_by):
    """A counter corrupted by SQL after a clean drain: the end-state rule reports it. A
    janitor pass recounts the batch (its repair path) and the end state is clean again,
    but its history says it repaired a drift: a drift the janitor healed during a run is
    still reported."""
    run.seed(2)
    run.drain()
    healthy = run.conn.execute(BATCH_COUNTERS).fetchone()
    assert dict(healthy) == {
        "status": "completed",
        "total_files": 2,
        "open_files": 0,
        "completed_files": 2,
        "failed_files": 0,
    }
    run.conn.execute(f"update import_batches set {corruption}")
    report = run.check()
    assert fired(report) == {"batch_counter_drift": 1, **also}, report.summary()

    stats = ChaosStats()
    assert Janitor(run.url, run.folder / "janitor.jsonl", stats).run_pass(), stats.janitor_errors
    assert run.conn.execute(BATCH_COUNTERS).fetchone() == healthy  # healed
    report = run.check()
    assert fired(report) == {"batch_drift_repaired": 1}, report.summary()
    [repair] = [
        e
        for e in read_history(run.histories())
        if e["call"] in ("refresh_stuck_batches", "refresh_drifted_batches") and e["refreshed"]
    ]
    assert repair["call"] == repaired_by and repair["worker"] == "janitor"
    assert [(b["status"], b["total"], b["open"]) for b in repair["batches"]] == [("completed", 2, 0)]


def test_every_batch_is_checked_even_one_without_jobs(run):
    """The older batch rule looks at batches with jobs only; the counters of a batch with
    none must be zero."""
    batch_id = run.rpc.create_batch("empty").batch_id
    assert run.check().violations == []
    run.conn.execute("update import_batches set total_files = 1, open_files = 1 where id = %s", (batch_id,))
    assert fired(run.check()) == {"batch_counter_drift": 1}
    assert Janitor(run.url, run.folder / "janitor.jsonl", ChaosStats()).run_pass()
    assert fired(run.check()) == {"batch_drift_repaired": 1}
    assert run.conn.execute("select total_files, open_files from import_batches").fetchone() == {
        "total_files": 0,
        "open_files": 0,
    }


def test_a_stuck_empty_batch_is_no_drift(run):
    """refresh_stuck_batches also ends a batch left `pending` with no job at all for ten
    minutes: nothing had drifted there."""
    batch_id = run.rpc.create_batch("abandoned upload").batch_id
    run.conn.execute("update import_batches set created_at = now() - interval '11 minutes' where id = %s", (batch_id,))
    assert Janitor(run.url, run.folder / "janitor.jsonl", ChaosStats()).run_pass()
    [stuck] = [e for e in read_history(run.histories()) if e["call"] == "refresh_stuck_batches"]
    assert stuck["refreshed"] == 1 and stuck["batches"][0]["total"] == 0
    report = run.check()
    assert report.violations == [], report.summary()


# -- documents --------------------------------------------------------------------------


def test_indexed_document_not_pointing_at_its_one_committed_generation(run):
    [document_id, _] = run.seed(2)
    run.drain()
    run.conn.execute("update documents set index_generation_id = null where id = %s", (document_id,))
    assert fired(run.check()) == {"indexed_generations": 1}


def test_indexed_document_without_a_committed_generation(run):
    [document_id] = run.seed(1)
    run.drain()
    run.conn.execute("update index_generations set status = 'superseded' where document_id = %s", (document_id,))
    # Its completed job now has no committed generation on its document either.
    assert fired(run.check()) == {"indexed_generations": 1, "completed_job_not_indexed": 1}


def test_counts_unlike_the_committed_rows(run):
    [document_id] = run.seed(1)
    run.drain()
    run.conn.execute("update documents set page_count = page_count + 1 where id = %s", (document_id,))
    assert fired(run.check()) == {"counts_mismatch": 1}


def test_search_term_counts_unlike_the_committed_chunks(run):
    """A commit whose term counts were lost (or counted twice) would rank by wrong IDFs."""
    run.seed(2)
    run.drain()
    assert fired(run.check()) == {}
    run.conn.execute(
        "insert into search_term_counts (collection, lexeme, documents, chunks) values ('default', 'alpha', 1, 1)"
    )
    assert fired(run.check()) == {"search_term_counts_drift": 1}


def test_lost_committed_chunk_rows_with_counts_made_to_agree(run):
    """The counts check cannot see it (the stored count follows the rows); the re-parse can."""
    [document_id] = run.seed(1)
    run.drain()
    run.conn.execute(
        """delete from document_chunks c using documents d
                         where d.id = c.document_id and c.index_generation_id = d.index_generation_id
                           and d.id = %s and c.ordinal = 0""",
        (document_id,),
    )
    run.conn.execute("update documents set chunk_count = chunk_count - 1 where id = %s", (document_id,))
    report = run.check()
    # The lost chunk's words are still counted: the search term counts disagree, word by word.
    assert fired(report)["lost_chunks"] == 1 and set(fired(report)) == {"lost_chunks", "search_term_counts_drift"}
    assert report.stats["audit"]["artifact_rows_deleted"] == 1  # no job open: audited, not flagged


def test_corrupted_committed_chunk_text(run):
    [document_id] = run.seed(1)
    run.drain()
    run.conn.execute(
        """update document_chunks c set content = 'something else' from documents d
                         where d.id = c.document_id and c.index_generation_id = d.index_generation_id
                           and d.id = %s and c.ordinal = 0""",
        (document_id,),
    )
    # The new text was vectorized by the trigger, but counted by no commit: the counts disagree too.
    report = run.check()
    assert fired(report)["lost_chunks"] == 1 and set(fired(report)) == {"lost_chunks", "search_term_counts_drift"}


# -- jobs against documents -------------------------------------------------------------


def test_a_job_completed_without_committing_a_generation(run):
    """The probe: claimed and completed with no generation committed. The job ends
    completed, its document stays processing."""
    run.seed(1, batch=False)
    job = run.claim()
    assert run.rpc.complete(job.job_id, job.document_id, worker_id="w1", lease_token=job.lease_token).ok
    report = run.check()
    assert fired(report) == {"completed_job_not_indexed": 1, "document_open_without_job": 1}, report.summary()
    assert report.stats["documents"] == {"processing": 1}


def test_a_document_queued_although_its_job_failed(run):
    run.seed(1, batch=False)
    run.fail(run.claim())
    run.conn.execute("update documents set status = 'queued'")
    assert fired(run.check()) == {"document_open_without_job": 1}


def test_a_queued_document_that_never_got_a_job(run):
    seed_document(run.conn)
    assert fired(run.check()) == {"document_open_without_job": 1}


def test_a_failed_document_whose_last_job_did_not_fail(run):
    run.seed(1, batch=False)
    run.fail(run.claim())
    # Settled as if a later success had superseded it, but the document was left failed.
    run.conn.execute("update ingestion_jobs set status = 'completed', stage = 'superseded'")
    assert fired(run.check()) == {"failed_document_last_job": 1}


def test_a_failed_document_with_a_committed_generation(run):
    [document_id] = run.seed(1, batch=False)
    run.drain()
    assert run.rpc.enqueue(document_id, kind="reindex").ok
    run.fail(run.claim("w3"), "w3")  # R15: the document stays indexed
    assert run.check().violations == []
    run.conn.execute("update documents set status = 'failed'")
    # ... and its completed index job now has no indexed document.
    assert fired(run.check()) == {"failed_document_committed": 1, "completed_job_not_indexed": 1}


def test_a_retry_that_wipes_the_live_index_on_the_pre_hardening_schema(schema, tmp_path):
    """R15 before its fix: failing a reindex of an indexed document drops its committed
    generation; the completed index job is left with a failed document."""
    run = Run(schema.url, tmp_path)
    try:
        [document_id] = run.seed(1, batch=False)
        run.drain()
        assert run.rpc.enqueue(document_id, kind="reindex").ok
        run.fail(run.claim("w3"), "w3")
        report = run.check()
    finally:
        run.close()
    if schema.hardened:
        assert report.violations == [], report.summary()
    else:
        assert fired(report) == {"completed_job_not_indexed": 1}, report.summary()


def test_split_commit_on_the_schema_before_lease_tokens(pre_tokens_db_url, tmp_path):
    """Commit and complete in two transactions (the client's path before lease tokens):
    the final attempt is dead-lettered between them, leaving an indexed document under
    a failed job."""
    run = Run(pre_tokens_db_url, tmp_path)
    try:
        run.seed(1, batch=False, max_attempts=1)
        job = run.claim()
        generation_id = run.begin(job)
        assert run.write_parsed(job, generation_id) is None
        assert run.rpc.commit_generation(job.job_id, job.document_id, generation_id, "w1").ok
        make_lease_stale(run.conn, job.job_id)
        assert run.janitor.expire_stale(stale_after_seconds=3).job_ids == [job.job_id]
        report = run.check()
    finally:
        run.close()
    assert fired(report) == {"committed_by_unfinished_job": 1}, report.summary()
    assert report.stats["jobs"] == {"failed": 1} and report.stats["documents"] == {"indexed": 1}


# -- the janitor's expiry -----------------------------------------------------------------


def test_a_write_accepted_after_the_janitor_expired_the_job(token_schema, tmp_path):
    """A zombie writes its rows after the janitor dead-lettered its job. Before lease
    tokens nothing in the database stopped it (artifacts were fenced by the client only);
    at head the artifact fence refuses it."""
    run = Run(token_schema.url, tmp_path)
    try:
        run.seed(1, batch=False, max_attempts=1)
        job = run.claim()
        generation_id = run.begin(job)
        make_lease_stale(run.conn, job.job_id)
        assert run.janitor.expire_stale(stale_after_seconds=3).job_ids == [job.job_id]
        error = run.write_parsed(job, generation_id)
        report = run.check()
        [expiry] = [e for e in read_history(run.histories()) if e["call"] == "expire_stale"]
    finally:
        run.close()
    assert expiry["worker"] == "janitor" and expiry["job_ids"] == [str(job.job_id)] and expiry["ok"]
    assert report.stats["expired_by_janitor"] == 1
    if token_schema.hardened:
        assert error is not None and error.sqlstate == "IF001"
        assert report.violations == [], report.summary()
    else:
        assert error is None
        assert fired(report) == {"write_after_expiry": 1}, report.summary()


def test_the_janitor_logs_its_calls_and_its_errors_are_recorded(schema, tmp_path):
    """Every janitor call goes into its history; a pass that fails (here: the
    pre-hardening schema has no expire_stale_ingestion_jobs) is counted and recorded, not
    swallowed."""
    stats = ChaosStats()
    janitor = Janitor(schema.url, tmp_path / "janitor.jsonl", stats)
    assert janitor.run_pass() is schema.hardened
    history = read_history([tmp_path / "janitor.jsonl"])
    if schema.hardened:
        assert [(e["call"], e["ok"]) for e in history] == [
            ("expire_stale", True),
            ("refresh_stuck_batches", True),
            ("refresh_drifted_batches", True),
            ("cleanup", True),
        ]
        assert stats.janitor_passes == 1 and stats.janitor_errors == []
        assert check(schema.url, [tmp_path / "janitor.jsonl"]).stats["janitor_call_errors"] == 0
    else:
        [entry] = history
        assert (entry["call"], entry["ok"]) == ("expire_stale", None)
        assert entry["error"].startswith("UndefinedFunction")
        assert stats.janitor_passes == 0 and len(stats.janitor_errors) == 1
        assert stats.janitor_errors[0].startswith("UndefinedFunction")
        assert check(schema.url, [tmp_path / "janitor.jsonl"]).stats["janitor_call_errors"] == 1


# -- builds deleted under their open job -----------------------------------------------


def test_a_build_deleted_under_its_open_job_fails_its_commit(run):
    """Seen from both sides: the audit records the delete, the commit finds nothing."""
    run.seed(1, batch=False)
    job = run.claim()
    generation_id = run.begin(job)
    assert run.write_parsed(job, generation_id) is None
    run.conn.execute("delete from index_generations where id = %s", (generation_id,))
    committed = run.rpc.commit_and_complete(
        job.job_id, job.document_id, generation_id, worker_id="w1", lease_token=job.lease_token
    )
    assert committed.reason == "generation_not_found"
    run.fail(job)
    report = run.check()
    # Its rows went by cascade with the generation: one entry, the generation's.
    assert fired(report) == {"generation_not_found": 1, "generation_deleted_under_open_job": 1}, report.summary()


def test_a_generation_deleted_under_its_open_job(run):
    run.seed(1, batch=False)
    job = run.claim()
    generation_id = run.begin(job)
    run.conn.execute("delete from index_generations where id = %s", (generation_id,))
    run.fail(job)  # the worker never commits: only the audit can tell
    assert fired(run.check()) == {"generation_deleted_under_open_job": 1}


def test_artifact_rows_deleted_under_their_open_job(run):
    run.seed(1, batch=False)
    job = run.claim()
    generation_id = run.begin(job)
    assert run.write_parsed(job, generation_id) is None
    run.conn.execute("delete from document_chunks where index_generation_id = %s", (generation_id,))
    run.fail(job)
    assert fired(run.check()) == {"artifacts_deleted_under_open_job": 1}


def test_cleanup_racing_a_new_claim(schema, tmp_path):
    """R23 (tests/race/test_r23_cleanup_guard.py) with the audit installed: before the
    hardening the cleanup deletes the new build under its open job, and the audit says
    so. At head the new build survives; only the abandoned build's pages, which the
    blocked delete had already chosen, go after the new job opened (counted, not flagged)."""
    install_deletion_audit(schema.url)
    with connect(schema.url) as conn, connect(schema.url, autocommit=False) as barrier, connect(schema.url) as cleaner:
        rpc = AnySchemaRpc(conn)
        seed_job(conn)
        document_id, _ = index_document(rpc, conn)
        abandoned_job, abandoned = start_reindex_build(rpc, conn, document_id, "worker-old")
        assert rpc.complete(abandoned_job.job_id, document_id, worker_id="worker-old").ok
        barrier.execute(
            "select 1 from document_pages where index_generation_id = %s and ordinal = 0 for update", (abandoned,)
        )
        cleaner_pid = backend_pid(cleaner)
        cleanup = Background(lambda: AnySchemaRpc(cleaner).cleanup_generations(dry_run=False))
        wait_until_blocked(conn, cleaner_pid, by=backend_pid(barrier))
        _fresh_job, fresh = start_reindex_build(rpc, conn, document_id, "worker-new")
        barrier.rollback()
        assert cleanup.join().ok
        fresh_chunks = conn.execute(
            "select count(*) as n from document_chunks where index_generation_id = %s", (fresh,)
        ).fetchone()["n"]
    report = check(schema.url, [])
    audit_rules = {rule: n for rule, n in report.by_rule.items() if "deleted_under_open_job" in rule}
    assert fresh_chunks == (3 if schema.hardened else 0)
    if schema.hardened:
        assert audit_rules == {}, report.summary()
        assert report.stats["audit"]["under_open_job"] == 1, report.summary()  # the abandoned pages
    else:
        # The fresh generation, its sections and chunks deleted before it (its pages went
        # with it by cascade: the blocked page delete's snapshot predates them).
        assert audit_rules == {"generation_deleted_under_open_job": 1, "artifacts_deleted_under_open_job": 2}, (
            report.summary()
        )


# -- the operator's deletes and batch cancels (the lifecycle contract) ------------------


def lifecycle_scene(run):
    """Every kind of delete and cancel, done right: an indexed document deleted (purged at
    once, its completed job stays completed), a document deleted while its build is in
    flight (its worker refused from then on, its rows left to the cleanup), and a batch
    cancelled with one job in flight and one queued. Returns the ids involved."""
    indexed, kept = run.seed(2)
    run.drain()
    deleted = run.operator.delete_document(indexed)
    assert deleted.ok and deleted.purged and not deleted.in_flight and deleted.cancelled_job_id is None, deleted
    run.seed(3)
    first, second = sorted(run.rpc.claim("w1", limit=2), key=lambda job: str(job.job_id))
    generations = {job.job_id: run.begin(job) for job in (first, second)}
    assert run.write_parsed(first, generations[first.job_id]) is None
    in_flight = run.operator.delete_document(first.document_id)
    assert in_flight.ok and in_flight.in_flight and not in_flight.purged, in_flight
    assert in_flight.cancelled_job_id == first.job_id
    beat = run.rpc.heartbeat(first.job_id, "w1", lease_token=first.lease_token)
    assert (beat.ok, beat.reason) == (False, "lease_lost")
    cancelled = run.operator.cancel_batch(first.batch_id)
    assert cancelled.ok and cancelled.cancelled == 2 and cancelled.in_flight == 1, cancelled
    refused = run.write_parsed(second, generations[second.job_id])
    assert refused is not None and refused.sqlstate == "IF001"
    return {
        "indexed": indexed,
        "kept": kept,
        "first": first,
        "second": second,
        "batch_id": first.batch_id,
        "in_flight_document": first.document_id,
    }


def test_control_deletes_and_cancels_done_right_have_no_violation(run):
    scene = lifecycle_scene(run)
    run.final_janitor_pass()
    report = run.check()
    assert report.violations == [], report.summary()
    assert report.stats["jobs"] == {"completed": 2, "cancelled": 3}, report.summary()
    # The deleted documents are not among the documents counted (those not deleted).
    assert report.stats["documents"] == {"indexed": 1, "cancelled": 2}, report.summary()
    assert report.stats["lifecycle"] == {
        "deleted_documents": 2,
        "deletes_ok": 2,
        "cancels_ok": 1,
        "jobs_cancelled_by_answers": 3,
        "retries_ok": 0,
        "jobs_retried_by_answers": 0,
        "retries_refused": {},
        "operator_call_errors": 0,
    }
    assert report.stats["cancel_refusals"] == 2  # the heartbeat and the artifact write
    assert report.stats["batches_cancelled"] == 1
    operator = [e for e in read_history(run.histories()) if e["worker"] == OPERATOR]
    assert [(e["call"], e["ok"], len(e["job_ids"])) for e in operator] == [
        ("delete_document", True, 0),
        ("delete_document", True, 1),
        ("cancel_batch", True, 2),
    ]
    assert operator[1]["job_ids"] == [str(scene["first"].job_id)] and operator[1]["in_flight"] is True
    # A refused call is logged with its reason and cancels nothing; so does a cancel of a
    # batch with nothing open (answered ok since issue 29's migration: the batch is marked
    # cancelled all the same), and the batch is counted once.
    assert run.operator.delete_document(scene["indexed"]).reason == "already_deleted"
    again = run.operator.cancel_batch(scene["batch_id"])
    assert (again.ok, again.nothing_open, again.cancelled, again.job_ids) == (True, True, 0, []), again
    report = run.check()
    assert report.violations == [], report.summary()
    assert report.stats["lifecycle"]["jobs_cancelled_by_answers"] == 3
    assert report.stats["lifecycle"]["cancels_ok"] == 1 and report.stats["batches_cancelled"] == 1


def test_a_deleted_document_left_in_search(run):
    """A delete that marks the document deleted but leaves its committed generation
    readable: found by search, and its rows never go."""
    [document_id, _] = run.seed(2)
    run.drain()
    run.conn.execute("update documents set status = 'deleted' where id = %s", (document_id,))
    report = run.check()
    assert fired(report) == {"deleted_document_searchable": 1, "deleted_document_rows_left": 1}, report.summary()
    assert "is found by search" in next(v for v in report.violations if "committed_document_chunks" in v)


def test_a_deleted_document_whose_rows_are_never_cleaned_up(run):
    """Deleted while its build was in flight: its rows wait for the janitor's cleanup.
    Without the final pass they are left (and the rule says so); after it, none is."""
    run.seed(1, batch=False)
    job = run.claim()
    run.write_parsed(job, run.begin(job))
    deleted = run.operator.delete_document(job.document_id)
    assert deleted.ok and deleted.in_flight and not deleted.purged, deleted
    report = run.check()
    assert fired(report) == {"deleted_document_rows_left": 1}, report.summary()
    for table in ("document_pages", "document_sections", "document_chunks", "index_generations", "document_sources"):
        assert table in report.violations[0], report.violations
    stats = run.final_janitor_pass()
    report = run.check()
    assert report.violations == [], report.summary()
    assert stats.final_cleanup_calls >= 1  # the pass's first cleanup deleted something: it went on until nothing


JOB_LEASE = ("status", "stage", "locked_by", "locked_at", "lease_expires_at", "completed_at", "error_message")


def test_a_write_accepted_after_a_delete_cancelled_the_job(run):
    """A cancel that does not fence: the job of a document deleted mid-build is put back
    under its lease (as if the cancel had not reached it) and its worker's heartbeat is
    accepted after the delete had returned; then the job is cancelled again, so only the
    history can tell."""
    run.seed(1, batch=False)
    job = run.claim()
    run.begin(job)
    held = run.conn.execute(
        f"select {', '.join(JOB_LEASE)} from ingestion_jobs where id = %s", (job.job_id,)
    ).fetchone()
    deleted = run.operator.delete_document(job.document_id)
    assert deleted.ok and deleted.cancelled_job_id == job.job_id, deleted
    cancelled = run.conn.execute(
        f"select {', '.join(JOB_LEASE)} from ingestion_jobs where id = %s", (job.job_id,)
    ).fetchone()
    assignments = ", ".join(f"{column} = %({column})s" for column in JOB_LEASE)
    run.conn.execute(f"update ingestion_jobs set {assignments} where id = %(id)s", {**held, "id": job.job_id})
    assert run.rpc.heartbeat(job.job_id, "w1", lease_token=job.lease_token).ok
    run.conn.execute(f"update ingestion_jobs set {assignments} where id = %(id)s", {**cancelled, "id": job.job_id})
    run.final_janitor_pass()
    report = run.check()
    assert fired(report) == {"write_after_cancel": 1}, report.summary()
    assert report.violations[0].startswith(
        f"job {job.job_id} heartbeat accepted (by w1, token {job.lease_token}) "
        f"after delete_document of {job.document_id}"
    )


# -- versions: the latest version always wins --------------------------------------------


def pricing(dollars: int) -> str:
    return f"# Pricing\n\nThe premium plan costs {dollars} dollars per month.\n"


def test_control_new_versions_done_right_have_no_violation(run):
    """Version 2 supersedes version 1 mid-build (its worker refused from then on); version
    3 comes once 2 is indexed and its build fails for good: 2's index stays."""
    first = run.put("pricing.md", pricing(10))
    old = run.claim()
    generation_id = run.begin(old)
    assert run.write_parsed(old, generation_id) is None
    second = run.put("pricing.md", pricing(25))
    assert (second.outcome, second.version, second.superseded_job_id) == ("new_version", 2, old.job_id)
    late = run.rpc.commit_and_complete(
        old.job_id, old.document_id, generation_id, worker_id="w1", lease_token=old.lease_token
    )
    assert late.lease_lost, late
    run.drain()
    third = run.put("pricing.md", pricing(40))
    job = run.claim()
    assert (job.document_id, job.document_version) == (first.document_id, third.version) == (first.document_id, 3)
    run.fail(job)
    run.final_janitor_pass()
    report = run.check()
    assert report.violations == [], report.summary()
    assert report.stats["versions_committed"] == {2: 1} and report.stats["indexed_at_an_older_version"] == 1
    assert report.stats["cancel_refusals"] == 1  # the late commit of version 1


def test_a_newer_version_completed_without_its_build_leaves_the_older_index(run):
    """A completion of version 2 accepted without a commit: the document stays indexed at
    version 1 with its latest version completed, which only the version rule sees (the
    older index is whole, and its job completed)."""
    first = run.put("pricing.md", pricing(10))
    run.drain()
    second = run.put("pricing.md", pricing(25))
    assert (second.document_id, second.version) == (first.document_id, 2)
    job = run.claim()
    assert run.rpc.complete(job.job_id, job.document_id, worker_id="w1", lease_token=job.lease_token).ok
    report = run.check()
    assert fired(report) == {"stale_version_committed": 1}, report.summary()
    assert report.violations[0] == (
        f"document {first.document_id} holds the index of version 1 although its latest version 2 completed"
    )


def test_an_older_version_committed_after_the_newer_one(run):
    """As a broken version fence would let it: version 1's build, superseded mid-build, is
    put back under its lease after version 2 committed, its generation labelled as version
    2's, and its commit is accepted. The history sees the older version commit after the
    newer one (its claim built version 1), and after the new version had cancelled its
    job; the re-parse of the latest bytes sees version 1's text in the index."""
    first = run.put("pricing.md", pricing(10))
    old = run.claim()
    generation_id = run.begin(old)
    assert run.write_parsed(old, generation_id) is None
    held = run.conn.execute(
        f"select {', '.join(JOB_LEASE)} from ingestion_jobs where id = %s", (old.job_id,)
    ).fetchone()
    assert run.put("pricing.md", pricing(25)).superseded_job_id == old.job_id
    run.drain()
    assignments = ", ".join(f"{column} = %({column})s" for column in JOB_LEASE)
    run.conn.execute(f"update ingestion_jobs set {assignments} where id = %(id)s", {**held, "id": old.job_id})
    run.conn.execute(
        "update index_generations set status = 'building', document_version = 2 where id = %s", (generation_id,)
    )
    run.conn.execute("update ingestion_jobs set document_version = 2 where id = %s", (old.job_id,))
    done = run.rpc.commit_and_complete(
        old.job_id, old.document_id, generation_id, worker_id="w1", lease_token=old.lease_token
    )
    assert done.ok, done
    report = run.check()
    assert fired(report) == {
        "older_version_committed_after_newer": 1,
        "write_after_cancel": 1,
        "lost_chunks": 1,
    }, report.summary()
    assert any(
        v.startswith(f"commit_and_complete of version 1 of document {first.document_id} (job {old.job_id}, by w1)")
        for v in report.violations
    ), report.summary()


def test_a_cancelled_batch_that_ends_not_cancelled(run):
    """A cancel that cancels the jobs but forgets the batch (no cancelled_at): its
    counters and status agree with each other, so only the cancel's answer tells."""
    run.seed(2)
    batch_id = run.conn.execute("select id from import_batches").fetchone()["id"]
    cancelled = run.operator.cancel_batch(batch_id)
    assert cancelled.ok and cancelled.cancelled == 2 and cancelled.batch.status == "cancelled", cancelled
    assert run.check().violations == []
    run.conn.execute("update import_batches set cancelled_at = null, status = 'completed' where id = %s", (batch_id,))
    report = run.check()
    assert fired(report) == {"cancelled_batch_not_cancelled": 1}, report.summary()


def test_a_drifted_cancelled_counter(run):
    run.seed(2)
    batch_id = run.conn.execute("select id from import_batches").fetchone()["id"]
    assert run.operator.cancel_batch(batch_id).ok
    run.conn.execute("update import_batches set cancelled_files = cancelled_files - 1 where id = %s", (batch_id,))
    report = run.check()
    assert fired(report) == {"batch_counter_drift": 1}, report.summary()
    assert report.violations[0] == (
        f"batch {batch_id} says cancelled total/open/completed/failed/cancelled "
        f"2/0/0/0/1 but its job rows say cancelled 2/0/0/0/2"
    ), report.violations


# -- the operator's retries ---------------------------------------------------------------


def test_control_retries_by_ids_by_batch_and_of_everything_are_logged_and_clean(run):
    """Three failed jobs of one batch put back by a retry of one by id, one of the batch,
    one of every failed job (nothing left by then), and one of a job already queued (refused):
    each logged with what it retried, each retried job's batch and what it refused; after a
    drain the run is clean."""
    run.seed(3)
    a, b, c = sorted(run.rpc.claim("w1", limit=3), key=lambda job: str(job.job_id))
    for job in (a, b, c):
        run.fail(job)
    assert run.operator.retry_failed(job_ids=[a.job_id]).job_ids == [a.job_id]
    assert run.operator.retry_failed(batch_id=a.batch_id).retried == 2
    assert run.operator.retry_failed().retried == 0
    refused = run.operator.retry_failed(job_ids=[a.job_id])
    assert refused.ok and [(r.job_id, r.reason) for r in refused.refused] == [(a.job_id, "already_queued")]
    run.drain()
    report = run.check()
    assert report.violations == [], report.summary()
    assert report.stats["jobs"] == {"completed": 3}, report.summary()
    retries = [e for e in read_history(run.histories()) if e["call"] == "retry_failed"]
    assert [(e["mode"], len(e["retried_job_ids"]), e["job_ids"]) for e in retries] == [
        ("jobs", 1, []),
        ("batch", 2, []),
        ("all", 0, []),
        ("jobs", 0, []),
    ]
    assert retries[0]["retried_batches"] == {str(a.job_id): str(a.batch_id)}
    assert retries[1]["batch_id"] == str(a.batch_id) and retries[0]["requested_job_ids"] == [str(a.job_id)]
    lifecycle = report.stats["lifecycle"]
    assert (
        lifecycle["retries_ok"],
        lifecycle["jobs_retried_by_answers"],
        lifecycle["retries_refused"],
        lifecycle["jobs_cancelled_by_answers"],
    ) == (4, 3, {"already_queued": 1}, 0), lifecycle


def test_a_retry_that_reopens_a_cancelled_batch(lock_order_schema, tmp_path):
    """Issue 29 item 3 as the checker sees it: a batch with one failed and one queued job
    is cancelled, then every failed job is retried (`ingest retry --failed`). Before the
    migration the failed one is put back in the queue (and built by the drain): the retry
    reopened a cancelled batch. At head the retry leaves it out and the run is clean."""
    run = Run(lock_order_schema.url, tmp_path)
    try:
        run.seed(2)
        [job] = run.rpc.claim("w1")
        run.fail(job)
        cancelled = run.operator.cancel_batch(job.batch_id)
        assert cancelled.ok and cancelled.cancelled == 1, cancelled
        retried = run.operator.retry_failed()
        run.drain()
        report = run.check()
    finally:
        run.close()
    if lock_order_schema.hardened:
        assert retried.retried == 0 and retried.refused == [], retried
        assert report.violations == [], report.summary()
    else:
        assert retried.job_ids == [job.job_id], retried
        assert fired(report) == {"retry_reopened_cancelled_batch": 1}, report.summary()
        assert report.violations[0] == (
            f"retry_failed (all) put job {job.job_id} back in the queue, of batch "
            f"{job.batch_id} which cancel_batch had cancelled before"
        )


# -- rollbacks: deadlocks and serialization failures ----------------------------------------


def test_a_deadlocked_acknowledgement_is_a_violation(run, new_conn):
    """A worker's bulk acknowledgement is the victim of a deadlock, forced with row locks:
    its transaction holds the job's batch row, another holds the job row and waits for the
    batch row (observed through pg_blocking_pids), then the acknowledgement asks for the job
    row. Its backend (deadlock_timeout 100ms, the other's 10s) finds the cycle and is
    rolled back with 40P01; the worker sends the acknowledgement again and it goes through,
    so the end state is clean and only the history's `rollback` entry tells. The checker
    counts it as a violation (`deadlock`) and in stats["deadlocks"]."""
    run.seed(1)
    job = run.claim()
    generation_id = run.begin(job)
    assert run.write_parsed(job, generation_id) is None
    holder, victim = new_conn(run.url, autocommit=False), new_conn(run.url, autocommit=False)
    holder_pid, victim_pid = backend_pid(holder), backend_pid(victim)
    holder.execute("set local deadlock_timeout = '10s'")
    holder.execute("select 1 from ingestion_jobs where id = %s for update", (job.job_id,))
    victim.execute("set local deadlock_timeout = '100ms'")
    victim.execute("select 1 from import_batches where id = %s for update", (job.batch_id,))
    waiting = Background(
        lambda: holder.execute("select 1 from import_batches where id = %s for update", (job.batch_id,)).fetchone()
    )
    wait_until_blocked(run.conn, holder_pid, by=victim_pid)
    worker = LoggedRpc(victim, HistoryFile(str(run.folder / "w3.jsonl")))
    item = CompleteItem(job.job_id, job.document_id, job.lease_token, generation_id)
    with pytest.raises(psycopg.errors.DeadlockDetected):
        worker.complete_many("w1", [item])
    victim.rollback()
    waiting.join()
    holder.rollback()
    [done] = run.rpc.complete_many("w1", [item])  # the worker's retry of a transient error
    assert done.ok, done

    report = run.check()
    assert fired(report) == {"deadlock": 1}, report.summary()
    assert (report.stats["deadlocks"], report.stats["serialization_failures"]) == (1, 0)
    assert report.stats["rollbacks_by_caller"] == {f"worker {DEADLOCK}": 1}
    assert report.stats["jobs"] == {"completed": 1} and report.stats["documents"] == {"indexed": 1}
    [rollback] = [e for e in read_history(run.histories()) if e["call"] == "rollback"]
    assert (rollback["rpc"], rollback["worker"], rollback["job_ids"], rollback["sqlstate"]) == (
        "rpc_complete_many",
        "w1",
        [str(job.job_id)],
        DEADLOCK,
    ), rollback
    assert report.violations[0].startswith(f"rpc_complete_many by w1 (jobs {job.job_id}) got 40P01: DeadlockDetected")
