"""Bulk acknowledgement (migration …_batch_counters_and_bulk_acks.sql): complete_many,
fail_or_retry_many and heartbeat_many settle or renew many jobs in one statement, each item
fenced by its own lease token and answered on its own, in the caller's order; each batch
row is updated once per call; job rows are locked in id order by all three. On the schema
before the migration the tests' client of older schemas (tests/any_schema_rpc.py, which the
race tests and the fault harness drive those schemas with) gives the same answers with one
call per item, as the clients of those releases did.
"""

import psycopg
import pytest
from psycopg.types.json import Jsonb

from ingestion_pipeline.db.models import CompleteItem, FailItem, LeaseBeat
from tests.any_schema_rpc import AnySchemaRpc, FenceLevel
from tests.helpers import (
    Background,
    age_lease,
    backend_pid,
    batch,
    document,
    job,
    make_lease_stale,
    seed_batch,
    seed_job,
    snapshot,
    wait_until_blocked,
    write_artifacts,
)


def leases(refs) -> list[tuple]:
    """Lost leases as (job id, token) pairs."""
    return [(ref.job_id, ref.lease_token) for ref in refs]


def claim_jobs(conn, count: int, batch_id=None, worker_id: str = "worker-1", **job_options) -> list:
    """`count` new jobs claimed by `worker_id`, in job-id order."""
    for _ in range(count):
        seed_job(conn, batch_id, **job_options)
    return sorted(AnySchemaRpc(conn).claim(worker_id, limit=count), key=lambda c: c.job_id)


def reclaim(conn, claim, worker_id: str = "worker-2"):
    """The lease of `claim` expires and `worker_id` takes the job: its token is superseded."""
    make_lease_stale(conn, claim.job_id)
    [taken] = AnySchemaRpc(conn).claim(worker_id)
    assert taken.job_id == claim.job_id and taken.lease_token > claim.lease_token
    return taken


def item(claim, **fields) -> CompleteItem:
    return CompleteItem(claim.job_id, claim.document_id, claim.lease_token, **fields)


def counters(conn, batch_id) -> tuple:
    row = batch(conn, batch_id)
    return row["status"], row["total_files"], row["open_files"], row["completed_files"], row["failed_files"]


def test_a_superseded_token_loses_its_item_alone_and_answers_keep_the_callers_order(conn):
    batch_id = seed_batch(conn)
    first, lost, last = claim_jobs(conn, 3, batch_id)
    new_holder = reclaim(conn, lost)

    answers = AnySchemaRpc(conn).complete_many("worker-1", [item(last), item(lost), item(first)])

    assert [(a.job_id, a.ok, a.reason) for a in answers] == [
        (last.job_id, True, None),
        (lost.job_id, False, "lease_lost"),
        (first.job_id, True, None),
    ]
    assert [job(conn, c.job_id)["status"] for c in (first, lost, last)] == ["completed", "processing", "completed"]
    assert (job(conn, lost.job_id)["locked_by"], job(conn, lost.job_id)["lease_token"]) == (
        "worker-2",
        new_holder.lease_token,
    )
    assert counters(conn, batch_id) == ("processing", 3, 1, 2, 0)


def test_an_item_with_a_generation_commits_it_and_one_without_just_completes(conn):
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    built, plain = claim_jobs(conn, 2, batch_id)
    generation_id = rpc.begin_generation(
        built.job_id, built.document_id, "worker-1", lease_token=built.lease_token
    ).generation_id
    write_artifacts(conn, built.document_id, generation_id, pages=2, sections=1, chunks=3)

    answers = rpc.complete_many(
        "worker-1", [item(built, generation_id=generation_id, metadata={"title": "Alpha"}), item(plain)]
    )

    assert [(a.ok, a.committed) for a in answers] == [(True, True), (True, False)]
    assert (answers[0].page_count, answers[0].section_count, answers[0].chunk_count) == (2, 1, 3)
    indexed = document(conn, built.document_id)
    assert (indexed["index_generation_id"], indexed["status"], indexed["title"]) == (generation_id, "indexed", "Alpha")
    assert (indexed["page_count"], indexed["section_count"], indexed["chunk_count"]) == (2, 1, 3)
    assert document(conn, plain.document_id)["index_generation_id"] is None
    assert job(conn, built.job_id)["status"] == job(conn, plain.job_id)["status"] == "completed"
    assert counters(conn, batch_id) == ("completed", 2, 0, 2, 0)


def test_a_generation_begun_by_another_claim_is_refused_for_its_item_only(conn):
    rpc = AnySchemaRpc(conn)
    [stalled] = claim_jobs(conn, 1)
    foreign = rpc.begin_generation(
        stalled.job_id, stalled.document_id, "worker-1", lease_token=stalled.lease_token
    ).generation_id
    taken = reclaim(conn, stalled)
    [other] = claim_jobs(conn, 1, worker_id="worker-2")

    answers = rpc.complete_many("worker-2", [item(taken, generation_id=foreign), item(other)])

    assert [(a.job_id, a.ok, a.reason) for a in answers] == [
        (taken.job_id, False, "generation_not_owned"),
        (other.job_id, True, None),
    ]
    assert job(conn, taken.job_id)["status"] == "processing"
    assert document(conn, taken.document_id)["index_generation_id"] is None
    assert (
        conn.execute("select status from index_generations where id = %s", (foreign,)).fetchone()["status"]
        == "building"
    )
    assert job(conn, other.job_id)["status"] == "completed"


def batch_row_updates(tx, calls) -> int:
    """Updates of import_batches rows by `calls`, inside the open transaction of `tx` (the
    backend's statistic also holds its earlier, not yet reported, transactions: a difference)."""
    stat = "select pg_stat_get_xact_tuples_updated('import_batches'::regclass) as n"
    before = tx.execute(stat).fetchone()["n"]
    calls()
    return tx.execute(stat).fetchone()["n"] - before


def test_a_call_updates_each_batch_row_once(db_url, conn, new_conn):
    batch_id = seed_batch(conn)
    claims = claim_jobs(conn, 10, batch_id)
    tx = new_conn(db_url, autocommit=False)
    rpc = AnySchemaRpc(tx)

    def bulk():
        assert all(a.ok for a in rpc.complete_many("worker-1", [item(c) for c in claims[:5]]))

    def one_by_one():  # the same five completions, one call each
        for c in claims[5:]:
            assert rpc.complete(c.job_id, c.document_id, worker_id="worker-1", lease_token=c.lease_token).ok

    assert batch_row_updates(tx, bulk) == 1
    tx.commit()
    assert batch_row_updates(tx, one_by_one) == 5  # what the statistic counts
    tx.commit()
    assert counters(conn, batch_id) == ("completed", 10, 0, 10, 0)


def test_fail_or_retry_many_mixes_retries_and_final_failures(conn):
    batch_id = seed_batch(conn)
    retried, failed, lost = claim_jobs(conn, 3, batch_id, max_attempts=3)
    [exhausted] = claim_jobs(conn, 1, batch_id, max_attempts=1)
    reclaim(conn, lost)

    answers = AnySchemaRpc(conn).fail_or_retry_many(
        "worker-1",
        [
            FailItem(exhausted.job_id, exhausted.document_id, exhausted.lease_token, retry=True, error_message="x"),
            FailItem(
                retried.job_id,
                retried.document_id,
                retried.lease_token,
                retry=True,
                error_message="x",
                stage="retry_wait",
                retry_delay_seconds=60,
            ),
            FailItem(lost.job_id, lost.document_id, lost.lease_token, retry=True),
            FailItem(failed.job_id, failed.document_id, failed.lease_token, retry=False, error_message="broken"),
        ],
    )

    assert [(a.job_id, a.ok, a.reason, a.retried, a.attempts_exhausted) for a in answers] == [
        (exhausted.job_id, True, None, False, True),
        (retried.job_id, True, None, True, False),
        (lost.job_id, False, "lease_lost", None, None),
        (failed.job_id, True, None, False, False),
    ]
    assert [(job(conn, c.job_id)["status"], job(conn, c.job_id)["stage"]) for c in (exhausted, retried, failed)] == [
        ("failed", "failed"),
        ("pending", "retry_wait"),
        ("failed", "failed"),
    ]
    wait = conn.execute(
        "select extract(epoch from next_run_at - now()) as s from ingestion_jobs where id = %s", (retried.job_id,)
    ).fetchone()["s"]
    assert 55 <= wait <= 60
    assert counters(conn, batch_id) == ("processing", 4, 2, 0, 2)


@pytest.mark.parametrize("rpc_name", ["complete_ingestion_jobs", "fail_or_retry_ingestion_jobs"])
def test_an_item_without_a_lease_token_fails_the_whole_call(conn, rpc_name):
    batch_id = seed_batch(conn)
    good, tokenless = claim_jobs(conn, 2, batch_id)  # the good one is settled first (id order)
    before = snapshot(conn)
    items = [
        {"job_id": str(c.job_id), "document_id": str(c.document_id), "lease_token": c.lease_token}
        for c in (tokenless, good)
    ]
    items[0]["lease_token"] = None

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="lease_token"):
        conn.execute(f"select {rpc_name}(%s)", (Jsonb(items),))
    assert snapshot(conn) == before


def test_heartbeat_many_renews_held_leases_and_lists_lost_ones(conn):
    renewed, quiet, lost = claim_jobs(conn, 3)
    for c in (renewed, quiet):
        age_lease(conn, c.job_id, 200)
    new_holder = reclaim(conn, lost)
    before = {c.job_id: job(conn, c.job_id) for c in (renewed, quiet, lost)}

    beat = AnySchemaRpc(conn).heartbeat_many(
        "worker-1",
        [
            LeaseBeat(lost.job_id, lost.lease_token, stage="zombie", progress=99),
            LeaseBeat(renewed.job_id, renewed.lease_token, stage="parse", progress=40),
            LeaseBeat(quiet.job_id, quiet.lease_token),
        ],
    )

    assert (beat.renewed, leases(beat.lost)) == (2, [(lost.job_id, lost.lease_token)])
    for c in (renewed, quiet):
        row = job(conn, c.job_id)
        assert row["lease_expires_at"] > before[c.job_id]["lease_expires_at"]
        assert conn.execute(
            "select %s::timestamptz > now() + interval '290 seconds' as ok", (row["lease_expires_at"],)
        ).fetchone()["ok"]
    assert (job(conn, renewed.job_id)["stage"], job(conn, renewed.job_id)["progress"]) == ("parse", 40)
    assert job(conn, lost.job_id) == before[lost.job_id]  # the new holder's lease is untouched
    assert job(conn, lost.job_id)["lease_token"] == new_holder.lease_token


def test_bulk_calls_check_their_arguments(conn):
    [claim] = claim_jobs(conn, 1)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("select heartbeat_ingestion_jobs(%s::uuid[], %s::bigint[])", ([claim.job_id], []))
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("select complete_ingestion_jobs(%s)", (Jsonb({"job_id": str(claim.job_id)}),))


def lockable(observer_url, new_conn, job_id, mode: str) -> bool:
    """Whether a third transaction could lock the job row in `mode` right now."""
    probe = new_conn(observer_url, autocommit=False)
    try:
        probe.execute(f"select 1 from ingestion_jobs where id = %s for {mode} nowait", (job_id,))
        return True
    except psycopg.errors.LockNotAvailable:
        return False
    finally:
        probe.rollback()


def test_a_heartbeat_and_a_completion_of_the_same_jobs_lock_in_id_order(db_url, conn, new_conn):
    """A completion holds the lower job and waits for the higher one (held FOR KEY SHARE by
    a third transaction, which blocks its FOR UPDATE but not a heartbeat's FOR NO KEY
    UPDATE). The heartbeat of both must wait at the lower job without having taken the
    higher one: in the caller's order (higher first) it would hold the row the completion
    waits for, and the two would deadlock as soon as the barrier goes."""
    low, high = claim_jobs(conn, 2)
    barrier = new_conn(db_url, autocommit=False)
    barrier.execute("select 1 from ingestion_jobs where id = %s for key share", (high.job_id,))

    completer, beater = new_conn(db_url), new_conn(db_url)
    completer_pid, beater_pid = backend_pid(completer), backend_pid(beater)
    completion = Background(lambda: AnySchemaRpc(completer).complete_many("worker-1", [item(high), item(low)]))
    wait_until_blocked(conn, completer_pid, by=backend_pid(barrier))
    assert not lockable(db_url, new_conn, low.job_id, "key share")  # the completion holds the lower job

    beat = Background(
        lambda: AnySchemaRpc(beater).heartbeat_many(
            "worker-1", [LeaseBeat(high.job_id, high.lease_token), LeaseBeat(low.job_id, low.lease_token)]
        )
    )
    wait_until_blocked(conn, beater_pid, by=completer_pid)
    assert lockable(db_url, new_conn, high.job_id, "no key update")  # the heartbeat has not taken it
    barrier.rollback()

    assert [(a.ok, a.job_id) for a in completion.join()] == [(True, high.job_id), (True, low.job_id)]
    beaten = beat.join()  # no DeadlockDetected; both jobs were completed meanwhile
    assert (beaten.renewed, sorted(leases(beaten.lost))) == (
        0,
        sorted([(low.job_id, low.lease_token), (high.job_id, high.lease_token)]),
    )


# -- the client on the schema before the migration: one call per item, the same answers ---


class CountingRpc(AnySchemaRpc):
    """Records the single-job calls the bulk methods fall back on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.single_calls: list[str] = []

    def complete(self, *args, **kwargs):
        self.single_calls.append("complete")
        return super().complete(*args, **kwargs)

    def commit_and_complete(self, *args, **kwargs):
        self.single_calls.append("commit_and_complete")
        return super().commit_and_complete(*args, **kwargs)

    def fail_or_retry(self, *args, **kwargs):
        self.single_calls.append("fail_or_retry")
        return super().fail_or_retry(*args, **kwargs)

    def heartbeat(self, *args, **kwargs):
        self.single_calls.append("heartbeat")
        return super().heartbeat(*args, **kwargs)


def test_the_fence_level_says_whether_bulk_calls_exist(bulk_schema, new_conn):
    level = AnySchemaRpc(new_conn(bulk_schema.url)).fence_level
    assert level >= FenceLevel.BULK_ACK if bulk_schema.hardened else level is FenceLevel.SERVER_RETRY_DELAY


def test_complete_many_gives_the_same_answers_with_or_without_the_bulk_rpc(bulk_schema, new_conn):
    conn = new_conn(bulk_schema.url)
    rpc = CountingRpc(conn)
    built, lost, plain = claim_jobs(conn, 3)
    generation_id = rpc.begin_generation(
        built.job_id, built.document_id, "worker-1", lease_token=built.lease_token
    ).generation_id
    write_artifacts(conn, built.document_id, generation_id, pages=1, sections=1, chunks=2)
    reclaim(conn, lost)

    answers = rpc.complete_many("worker-1", [item(plain), item(lost), item(built, generation_id=generation_id)])

    assert [(a.job_id, a.ok, a.reason) for a in answers] == [
        (plain.job_id, True, None),
        (lost.job_id, False, "lease_lost"),
        (built.job_id, True, None),
    ]
    assert (answers[2].generation_id, answers[2].chunk_count) == (generation_id, 2)
    assert document(conn, built.document_id)["index_generation_id"] == generation_id
    assert [job(conn, c.job_id)["status"] for c in (built, lost, plain)] == ["completed", "processing", "completed"]
    assert rpc.single_calls == ([] if bulk_schema.hardened else ["complete", "complete", "commit_and_complete"])


def test_fail_or_retry_many_gives_the_same_answers_with_or_without_the_bulk_rpc(bulk_schema, new_conn):
    conn = new_conn(bulk_schema.url)
    rpc = CountingRpc(conn)
    retried, failed, lost = claim_jobs(conn, 3)
    reclaim(conn, lost)

    answers = rpc.fail_or_retry_many(
        "worker-1",
        [
            FailItem(c.job_id, c.document_id, c.lease_token, retry=retry, error_message="x")
            for c, retry in ((failed, False), (lost, True), (retried, True))
        ],
    )

    assert [(a.job_id, a.ok, a.reason, a.retried) for a in answers] == [
        (failed.job_id, True, None, False),
        (lost.job_id, False, "lease_lost", None),
        (retried.job_id, True, None, True),
    ]
    assert [job(conn, c.job_id)["status"] for c in (retried, failed, lost)] == ["pending", "failed", "processing"]
    assert rpc.single_calls == ([] if bulk_schema.hardened else ["fail_or_retry"] * 3)


def test_heartbeat_many_gives_the_same_answers_with_or_without_the_bulk_rpc(bulk_schema, new_conn):
    conn = new_conn(bulk_schema.url)
    rpc = CountingRpc(conn)
    held, lost = claim_jobs(conn, 2)
    age_lease(conn, held.job_id, 200)
    before = job(conn, held.job_id)["lease_expires_at"]
    reclaim(conn, lost)

    beat = rpc.heartbeat_many(
        "worker-1", [LeaseBeat(lost.job_id, lost.lease_token), LeaseBeat(held.job_id, held.lease_token, progress=50)]
    )

    assert (beat.ok, beat.renewed, leases(beat.lost)) == (True, 1, [(lost.job_id, lost.lease_token)])
    assert job(conn, held.job_id)["lease_expires_at"] > before
    assert job(conn, held.job_id)["progress"] == 50
    assert rpc.single_calls == ([] if bulk_schema.hardened else ["heartbeat"] * 2)
