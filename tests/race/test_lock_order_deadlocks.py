"""Issue 29, items 1 and 2: the deadlocks of two lock orders (migration …_one_lock_order.sql).

1. `retry_failed_ingestion_jobs` retries its jobs one `retry_ingestion_job` at a time, in
   job-id order, and each moves its own batch row: with failed jobs Ja (batch B2) < Jb
   (batch B1) and B1 < B2 it locks Ja, Da, B2, Jb, Db, B1. A worker's bulk acknowledgement
   (`complete_ingestion_jobs`) of one job in each batch locks its jobs, its documents, then
   B1, B2. The same cause locks a document after a batch row: the retry of Ja, Jb of one
   batch B locks B before Db, a re-enqueue of Db into B (`enqueue_ingestion_job`) Db before B.
2. `commit_and_complete_ingestion_job` (or `complete_ingestion_jobs` with a generation) of
   document D's open job locks the document, then marks D's older failed job
   `completed/superseded` (a job row after a document); `retry_ingestion_job` of that failed
   job locks the job, then D.

Each deadlock is forced in both orders, that is whichever side takes its first contested
lock first: a third transaction holds a row one side needs mid-way (a document, a batch, a
generation, or an uncommitted open job its insert must wait for), so that side stops there
holding its earlier locks (observed through pg_blocking_pids); the other side starts and is
seen blocked on it; then the third transaction ends. A waiter queued first on a row gets it
first. Before the migration one side gets 40P01 (which one depends on whose deadlock check
runs first: either is the defect) and its whole transaction rolls back. At head the lock
order (jobs, generations, documents, batches last) leaves no cycle: both calls go through
with the answers of some serial order, and the batch counters agree with the jobs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

import psycopg
import pytest
from psycopg.errors import DeadlockDetected

from ingestion_pipeline.db.models import ClaimedJob, CompleteItem
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import (
    Background,
    backend_pid,
    batch,
    document,
    index_document,
    job,
    seed_batch,
    seed_job,
    wait_until_blocked,
    write_artifacts,
)

# -- connections, barriers and outcomes -------------------------------------------------


def racer(new_conn, url: str) -> tuple[psycopg.Connection, int]:
    """An autocommit connection for one side of a race (each RPC its own transaction) that
    checks for deadlocks after 100 ms of waiting; and its backend pid."""
    conn = new_conn(url)
    conn.execute("set deadlock_timeout = '100ms'")
    return conn, backend_pid(conn)


def hold(new_conn, url: str, statement: str, *args) -> tuple[psycopg.Connection, int]:
    """The third transaction: runs `statement` (a row lock, or an insert) and stays open
    until the test commits or rolls it back."""
    conn = new_conn(url, autocommit=False)
    conn.execute(statement, args)
    return conn, backend_pid(conn)


def wait_until_blocked_or_finished(
    observer: psycopg.Connection, pid: int, call: Background, by: int, timeout: float = 15.0
) -> bool:
    """True once backend `pid` is blocked on a lock held by `by`; False if its call finished
    without waiting (at head the lock order may let it through while the other side stalls).

    This observes a state the test forced; it does not decide an ordering."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not call.thread.is_alive():
            return False
        if by in observer.execute("select pg_blocking_pids(%s) as b", (pid,)).fetchone()["b"]:
            return True
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} neither blocked on {by} nor finished")


def joined(**calls: Background) -> dict:
    """Each call's result, or the DeadlockDetected it got."""
    outcomes = {}
    for name, call in calls.items():
        try:
            outcomes[name] = call.join()
        except DeadlockDetected as exc:
            outcomes[name] = exc
    return outcomes


def deadlock_victims(outcomes: dict) -> list[str]:
    return [name for name, outcome in outcomes.items() if isinstance(outcome, DeadlockDetected)]


def assert_observed(hardened: bool, outcomes: dict, second_waited: bool) -> set[str]:
    """Before: the second side did wait on the first, and exactly one side got 40P01. At
    head: no side did. Returns the sides that went through."""
    victims = deadlock_victims(outcomes)
    if hardened:
        assert victims == [], outcomes
    else:
        assert second_waited, "the forced interleaving did not happen"
        assert len(victims) == 1, outcomes
    return set(outcomes) - set(victims)


def assert_counters_match_jobs(conn: psycopg.Connection, batch_id: UUID) -> None:
    row = batch(conn, batch_id)
    counted = conn.execute(
        "select count(*) as total_files, count(*) filter (where status in ('pending', 'processing')) as open_files, "
        "count(*) filter (where status = 'completed') as completed_files, "
        "count(*) filter (where status = 'failed') as failed_files "
        "from ingestion_jobs where batch_id = %s",
        (batch_id,),
    ).fetchone()
    assert {key: row[key] for key in counted} == counted, (row, counted)


def open_jobs(conn: psycopg.Connection, document_id: UUID) -> list[UUID]:
    return [
        r["id"]
        for r in conn.execute(
            "select id from ingestion_jobs where document_id = %s and status in ('pending', 'processing')",
            (document_id,),
        ).fetchall()
    ]


# -- seeds ------------------------------------------------------------------------------


class Job(NamedTuple):
    id: UUID
    document_id: UUID


def fail_next_claim(rpc: AnySchemaRpc) -> Job:
    """Claim the one pending job and fail it for good."""
    [claim] = rpc.claim("seed-worker")
    assert rpc.fail_or_retry(
        claim.job_id,
        claim.document_id,
        worker_id=claim.locked_by,
        lease_token=claim.lease_token,
        retry=False,
        error_message="parser crashed",
    ).ok
    return Job(claim.job_id, claim.document_id)


def failed_job(conn: psycopg.Connection, batch_id: UUID) -> Job:
    """A new document of `batch_id` whose only job failed."""
    seed_job(conn, batch_id, max_attempts=1)
    return fail_next_claim(AnySchemaRpc(conn))


def retry(conn: psycopg.Connection, *jobs: Job):
    """The operator's bulk retry (`ingest retry`) of `jobs`."""
    return AnySchemaRpc(conn).retry_failed(job_ids=[j.id for j in jobs])


# -- 1. bulk retry against a bulk acknowledgement of the same two batches ---------------


@dataclass
class CrossedBatches:
    b1: UUID
    b2: UUID  # b1 < b2
    ja: Job  # failed, in b2
    jb: Job  # failed, in b1; ja < jb
    claims: list[ClaimedJob]  # processing, one in each batch


def crossed_batches(conn: psycopg.Connection) -> CrossedBatches:
    """Ids are random: fail jobs in both batches until one of B2 sorts before one of B1."""
    b1, b2 = sorted([seed_batch(conn), seed_batch(conn)])
    in_b1, in_b2 = [], []
    while not (in_b1 and min(in_b2) < max(in_b1)):
        assert len(in_b1) < 20
        in_b2.append(failed_job(conn, b2))
        in_b1.append(failed_job(conn, b1))
    seed_job(conn, b1)
    seed_job(conn, b2)
    claims = AnySchemaRpc(conn).claim("ack-worker", limit=2)
    assert sorted(c.batch_id for c in claims) == [b1, b2]
    return CrossedBatches(b1, b2, min(in_b2), max(in_b1), claims)


def ack(conn: psycopg.Connection, claims: list[ClaimedJob]):
    """The worker's bulk acknowledgement of its claims (one `complete_ingestion_jobs`)."""
    return AnySchemaRpc(conn).complete_many(
        "ack-worker", [CompleteItem(c.job_id, c.document_id, c.lease_token) for c in claims]
    )


def assert_retry_and_ack_settled(schema, setup, seeded: CrossedBatches, outcomes: dict, second_waited: bool):
    through = assert_observed(schema.hardened, outcomes, second_waited)
    if "retry" in through:
        assert sorted(outcomes["retry"].job_ids) == sorted([seeded.ja.id, seeded.jb.id]), outcomes["retry"]
        assert outcomes["retry"].refused == []
    if "ack" in through:
        assert [r.ok for r in outcomes["ack"]] == [True, True], outcomes["ack"]
    # The victim's transaction left nothing behind (the worker's jobs stay processing).
    for failed in (seeded.ja, seeded.jb):
        assert job(setup, failed.id)["status"] == ("pending" if "retry" in through else "failed")
    for claim in seeded.claims:
        assert job(setup, claim.job_id)["status"] == ("completed" if "ack" in through else "processing")
    for batch_id in (seeded.b1, seeded.b2):
        assert_counters_match_jobs(setup, batch_id)


def test_retry_holding_the_later_batch_against_a_bulk_ack(lock_order_schema, new_conn):
    """Forces the retry to take B2 first: a third transaction holds Jb's document, so the
    retry stops there (before: holding Ja, Da and B2; head: job rows, no batch). The ack
    starts (before: takes B1, waits on B2 held by the retry). Released, the retry goes on
    to B1 (before: held by the ack: 40P01). Head: the ack went through at once; the retry
    follows; both batches' counters are exact."""
    url = lock_order_schema.url
    setup = new_conn(url)
    seeded = crossed_batches(setup)
    blocker, blocker_pid = hold(
        new_conn, url, "select 1 from documents where id = %s for no key update", seeded.jb.document_id
    )
    operator, operator_pid = racer(new_conn, url)
    worker, worker_pid = racer(new_conn, url)

    retrying = Background(lambda: retry(operator, seeded.ja, seeded.jb))
    wait_until_blocked(setup, operator_pid, by=blocker_pid)
    acking = Background(lambda: ack(worker, seeded.claims))
    ack_waited = wait_until_blocked_or_finished(setup, worker_pid, acking, by=operator_pid)
    blocker.commit()

    outcomes = joined(retry=retrying, ack=acking)
    assert_retry_and_ack_settled(lock_order_schema, setup, seeded, outcomes, ack_waited)


def test_bulk_ack_holding_the_earlier_batch_against_a_retry(lock_order_schema, new_conn):
    """Forces the ack to take B1 first: a third transaction holds B2; the retry stops on it
    (before: holding Ja, Da, and first in B2's queue; head: holding all its jobs, documents
    and B1). The ack starts (before: takes B1, queues on B2 behind the retry; head: waits
    on B1). Released, the retry gets B2 and goes on to B1 (before: held by the ack, which
    waits on B2: 40P01). Head: the retry finishes, then the ack; counters exact."""
    url = lock_order_schema.url
    setup = new_conn(url)
    seeded = crossed_batches(setup)
    blocker, blocker_pid = hold(
        new_conn, url, "select 1 from import_batches where id = %s for no key update", seeded.b2
    )
    operator, operator_pid = racer(new_conn, url)
    worker, worker_pid = racer(new_conn, url)

    retrying = Background(lambda: retry(operator, seeded.ja, seeded.jb))
    wait_until_blocked(setup, operator_pid, by=blocker_pid)
    acking = Background(lambda: ack(worker, seeded.claims))
    ack_waited = wait_until_blocked_or_finished(setup, worker_pid, acking, by=operator_pid)
    blocker.commit()

    outcomes = joined(retry=retrying, ack=acking)
    assert_retry_and_ack_settled(lock_order_schema, setup, seeded, outcomes, ack_waited)


# -- 1'. bulk retry against a re-enqueue: a document locked after a batch row -----------


@dataclass
class RetryAndReenqueue:
    batch_id: UUID
    ja: Job
    jb: Job  # ja < jb, both failed in the batch; the re-enqueue is of jb's document


def retry_and_reenqueue(conn: psycopg.Connection) -> RetryAndReenqueue:
    batch_id = seed_batch(conn)
    ja, jb = sorted([failed_job(conn, batch_id), failed_job(conn, batch_id)])
    return RetryAndReenqueue(batch_id, ja, jb)


def reenqueue(conn: psycopg.Connection, seeded: RetryAndReenqueue):
    return AnySchemaRpc(conn).enqueue(seeded.jb.document_id, batch_id=seeded.batch_id)


def assert_retry_and_reenqueue_settled(schema, setup, seeded: RetryAndReenqueue, outcomes: dict, second_waited: bool):
    through = assert_observed(schema.hardened, outcomes, second_waited)
    if "retry" in through:
        retried = outcomes["retry"]
        assert seeded.ja.id in retried.job_ids, retried
        jb_retried = seeded.jb.id in retried.job_ids
        if "enqueue" in through:  # one serial order or the other: one of the two is refused
            enqueued = outcomes["enqueue"]
            assert enqueued.ok != jb_retried, (retried, enqueued)
            if not jb_retried:
                assert [(r.job_id, r.reason) for r in retried.refused] == [(seeded.jb.id, "already_queued")]
            else:
                assert (enqueued.reason, enqueued.job_id) == ("already_queued", seeded.jb.id)
    assert job(setup, seeded.ja.id)["status"] == ("pending" if "retry" in through else "failed")
    assert len(open_jobs(setup, seeded.jb.document_id)) == 1  # whoever went through opened it
    assert_counters_match_jobs(setup, seeded.batch_id)


def test_retry_holding_the_batch_against_a_reenqueue(lock_order_schema, new_conn):
    """Forces the retry to take the batch first: a third transaction holds job Jb (FOR
    UPDATE), so the retry stops after Ja (before: holding Ja, Da and the batch row; head:
    Ja only). The re-enqueue of Db starts (before: locks Db, inserts its job, waits on the
    batch row). Released, the retry locks Jb and wants Db (before: held by the enqueue:
    40P01). Head: the enqueue went through at once; the retry then refuses Jb
    (already_queued) and retries Ja."""
    url = lock_order_schema.url
    setup = new_conn(url)
    seeded = retry_and_reenqueue(setup)
    blocker, blocker_pid = hold(new_conn, url, "select 1 from ingestion_jobs where id = %s for update", seeded.jb.id)
    operator, operator_pid = racer(new_conn, url)
    uploader, uploader_pid = racer(new_conn, url)

    retrying = Background(lambda: retry(operator, seeded.ja, seeded.jb))
    wait_until_blocked(setup, operator_pid, by=blocker_pid)
    enqueuing = Background(lambda: reenqueue(uploader, seeded))
    enqueue_waited = wait_until_blocked_or_finished(setup, uploader_pid, enqueuing, by=operator_pid)
    blocker.commit()

    outcomes = joined(retry=retrying, enqueue=enqueuing)
    assert_retry_and_reenqueue_settled(lock_order_schema, setup, seeded, outcomes, enqueue_waited)


def test_reenqueue_holding_the_document_against_a_retry(lock_order_schema, new_conn):
    """Forces the enqueue to take Db first: a third transaction has inserted (not yet
    committed) an open job of Db, so the enqueue's insert waits on it, holding Db. The
    retry starts (before: Ja, Da, the batch row, Jb, then waits on Db; head: its jobs,
    then waits on Db). The third transaction rolls back: the enqueue inserts its job and
    wants the batch row (before: held by the retry: 40P01). Head: the enqueue finishes,
    then the retry, which refuses Jb (already_queued)."""
    url = lock_order_schema.url
    setup = new_conn(url)
    seeded = retry_and_reenqueue(setup)
    blocker, blocker_pid = hold(
        new_conn, url, "insert into ingestion_jobs (document_id) values (%s)", seeded.jb.document_id
    )
    operator, operator_pid = racer(new_conn, url)
    uploader, uploader_pid = racer(new_conn, url)

    enqueuing = Background(lambda: reenqueue(uploader, seeded))
    wait_until_blocked(setup, uploader_pid, by=blocker_pid)
    retrying = Background(lambda: retry(operator, seeded.ja, seeded.jb))
    retry_waited = wait_until_blocked_or_finished(setup, operator_pid, retrying, by=uploader_pid)
    blocker.rollback()

    outcomes = joined(retry=retrying, enqueue=enqueuing)
    assert_retry_and_reenqueue_settled(lock_order_schema, setup, seeded, outcomes, retry_waited)


# -- 2. commit-and-complete against the retry of the document's older failed job --------


@dataclass
class RebuildWithFailedSibling:
    batch_id: UUID
    document_id: UUID
    committed_generation_id: UUID  # G0: committed by the first build
    failed: Job  # an earlier reindex of the document, failed
    claim: ClaimedJob  # the open reindex, processing
    generation_id: UUID  # G: its building generation, rows written


def rebuild_with_failed_sibling(conn: psycopg.Connection) -> RebuildWithFailedSibling:
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    document_id, committed = index_document(rpc, conn)
    assert rpc.enqueue(document_id, batch_id=batch_id, kind="reindex").ok
    failed = fail_next_claim(rpc)
    assert rpc.enqueue(document_id, batch_id=batch_id, kind="reindex").ok
    [claim] = rpc.claim("builder")
    generation_id = rpc.begin_generation(
        claim.job_id, document_id, claim.locked_by, lease_token=claim.lease_token
    ).generation_id
    write_artifacts(conn, document_id, generation_id)
    return RebuildWithFailedSibling(batch_id, document_id, committed, failed, claim, generation_id)


def commit(conn: psycopg.Connection, seeded: RebuildWithFailedSibling, how: str) -> bool:
    """The worker commits G and completes its job in one transaction; True when accepted."""
    rpc, claim = AnySchemaRpc(conn), seeded.claim
    if how == "commit_and_complete":
        return rpc.commit_and_complete(
            claim.job_id,
            claim.document_id,
            seeded.generation_id,
            worker_id=claim.locked_by,
            lease_token=claim.lease_token,
        ).ok
    [done] = rpc.complete_many(
        claim.locked_by,
        [CompleteItem(claim.job_id, claim.document_id, claim.lease_token, generation_id=seeded.generation_id)],
    )
    return done.ok and done.committed


def assert_commit_and_retry_settled(
    schema, setup, seeded: RebuildWithFailedSibling, outcomes: dict, second_waited: bool
):
    through = assert_observed(schema.hardened, outcomes, second_waited)
    if "retry" in through:  # refused in either serial order: the rebuild is open, or it settled the job
        assert not outcomes["retry"].ok and outcomes["retry"].reason in ("already_queued", "completed"), outcomes[
            "retry"
        ]
    doc = document(setup, seeded.document_id)
    if "commit" in through:
        assert outcomes["commit"] is True
        assert (doc["status"], doc["index_generation_id"]) == ("indexed", seeded.generation_id)
        assert job(setup, seeded.claim.job_id)["status"] == "completed"
        superseded = job(setup, seeded.failed.id)
        assert (superseded["status"], superseded["stage"]) == ("completed", "superseded")
        assert open_jobs(setup, seeded.document_id) == []
    else:  # the victim's commit rolled back: still the first build, the rebuild still open
        assert (doc["status"], doc["index_generation_id"]) == ("indexed", seeded.committed_generation_id)
        assert open_jobs(setup, seeded.document_id) == [seeded.claim.job_id]
        assert job(setup, seeded.failed.id)["status"] == "failed"
    assert_counters_match_jobs(setup, seeded.batch_id)


COMMITS = pytest.mark.parametrize("how", ["commit_and_complete", "complete_many"])
# Which side takes its first contested row first, by what a third transaction holds:
# - "generation" (G0, the committed generation the commit supersedes): the commit stops
#   there (before: holding its job, G and D; head: its job and D's failed job, no document);
#   the retry of the failed job starts (before: locks it, waits on D; head: waits on the
#   failed job); released, the commit goes on to settle the failed job (before: held by the
#   retry: 40P01).
# - "document" (D): the commit stops on it (before: holding its job and G, first in D's
#   queue; head: also the failed job); the retry starts (before: locks the failed job,
#   queues on D behind the commit; head: waits on the failed job); released, the commit gets
#   D and goes on to the failed job (before: held by the retry, which waits on D: 40P01).
HELD = {
    "generation": ("select 1 from index_generations where id = %s for no key update", "committed_generation_id"),
    "document": ("select 1 from documents where id = %s for no key update", "document_id"),
}


@COMMITS
@pytest.mark.parametrize("held", list(HELD))
def test_a_commit_and_a_retry_of_its_documents_failed_job(lock_order_schema, new_conn, how, held):
    """Item 2, forced in both orders (HELD). Head: the commit goes through, the retry is
    refused, D is indexed at G with no job open."""
    url = lock_order_schema.url
    setup = new_conn(url)
    seeded = rebuild_with_failed_sibling(setup)
    statement, row = HELD[held]
    blocker, blocker_pid = hold(new_conn, url, statement, getattr(seeded, row))
    worker, worker_pid = racer(new_conn, url)
    operator, operator_pid = racer(new_conn, url)

    committing = Background(lambda: commit(worker, seeded, how))
    wait_until_blocked(setup, worker_pid, by=blocker_pid)
    retrying = Background(lambda: AnySchemaRpc(operator).retry(seeded.failed.id))
    retry_waited = wait_until_blocked_or_finished(setup, operator_pid, retrying, by=worker_pid)
    blocker.commit()

    outcomes = joined(commit=committing, retry=retrying)
    assert_commit_and_retry_settled(lock_order_schema, setup, seeded, outcomes, retry_waited)
