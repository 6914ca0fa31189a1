"""The bodies of the lease-token race tests (migration …_lease_tokens.sql), shared by two
test modules, each with a thin `test_…` wrapper per body: tests/race/test_lease_tokens.py
(just before the migration and at head) and tests/race/test_fences_through_pooler.py (at head,
through PgBouncer). Each body takes the fixture's `tests.conftest.Schema` (`url`, where every
connection of the test goes; `hardened`; `direct_url`, the server itself, for the lock barrier
and its observer) and `new_conn`."""

from datetime import UTC, datetime

from ingestion_pipeline.db.models import ClaimedJob
from tests.any_schema_rpc import AnySchemaRpc
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
    wait_until_client_blocked,
    write_artifacts,
)


def claim_one(rpc: AnySchemaRpc, worker_id: str, stale_after_seconds: int = 300) -> ClaimedJob:
    [claimed] = rpc.claim(worker_id, stale_after_seconds=stale_after_seconds)
    return claimed


def stage_rows(conn, job_id) -> int:
    return conn.execute("select count(*) as n from ingestion_job_stages where job_id = %s", (job_id,)).fetchone()["n"]


def zombie_calls(rpc: AnySchemaRpc, claim: ClaimedJob, generation_id, batch_id) -> dict:
    """Every fenced call a stalled worker thread may still make, with its own claim's token
    (None before the migration: then the worker id is the fence)."""
    job_id, document_id, token = claim.job_id, claim.document_id, claim.lease_token
    now = datetime.now(UTC)
    return {
        "heartbeat": lambda: rpc.heartbeat(job_id, claim.locked_by, lease_token=token, progress=90),
        "begin_generation": lambda: rpc.begin_generation(job_id, document_id, claim.locked_by, lease_token=token),
        "record_stage": lambda: rpc.record_stage(
            job_id, claim.locked_by, "parse", started_at=now, finished_at=now, lease_token=token
        ),
        "commit_generation": lambda: rpc.commit_generation(
            job_id, document_id, generation_id, claim.locked_by, {"title": "zombie"}, lease_token=token
        ),
        "complete": lambda: rpc.complete(
            job_id, document_id, worker_id=claim.locked_by, lease_token=token, batch_id=batch_id
        ),
        "fail_or_retry": lambda: rpc.fail_or_retry(
            job_id,
            document_id,
            worker_id=claim.locked_by,
            lease_token=token,
            retry=False,
            error_message="zombie",
            batch_id=batch_id,
        ),
        "commit_and_complete": lambda: rpc.commit_and_complete(
            job_id, document_id, generation_id, worker_id=claim.locked_by, lease_token=token, batch_id=batch_id
        ),
    }


def assert_zombie_changes_nothing(conn, rpc, claim, generation_id, batch_id) -> None:
    before, logged = snapshot(conn), stage_rows(conn, claim.job_id)
    outcomes = {name: call() for name, call in zombie_calls(rpc, claim, generation_id, batch_id).items()}
    assert {name: o.reason for name, o in outcomes.items()} == {name: "lease_lost" for name in outcomes}
    assert snapshot(conn) == before
    assert stage_rows(conn, claim.job_id) == logged


def finish(rpc: AnySchemaRpc, conn, claim: ClaimedJob, batch_id, chunks: int = 4):
    """The current holder builds, writes and commits-and-completes its generation."""
    generation_id = rpc.begin_generation(
        claim.job_id, claim.document_id, claim.locked_by, lease_token=claim.lease_token
    ).generation_id
    write_artifacts(conn, claim.document_id, generation_id, chunks=chunks)
    outcome = rpc.commit_and_complete(
        claim.job_id,
        claim.document_id,
        generation_id,
        worker_id=claim.locked_by,
        lease_token=claim.lease_token,
        batch_id=batch_id,
    )
    assert outcome.ok, outcome
    return generation_id


def a_stalled_thread_of_a_reused_worker_id_is_fenced_by_its_token(schema, new_conn):
    """The issue's reproduction. Claim loop W claims (T1) and stalls; W2 reclaims and
    retries; W claims the job again (T3, attempt 3). Before: the stalled T1 passes the
    worker-id fence again (heartbeat, begin, commit, complete, fail) and ends the job
    failed "zombie" under T3, which then gets lease_lost. After: every T1 call with T1's
    token is lease_lost and changes nothing; T3 finishes; tokens T1 < W2 < T3."""
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id)

    t1 = claim_one(rpc, "W")
    t1_generation = rpc.begin_generation(job_id, document_id, "W", lease_token=t1.lease_token).generation_id
    write_artifacts(conn, document_id, t1_generation)
    make_lease_stale(conn, job_id)  # T1 stalls
    w2 = claim_one(rpc, "W2")
    assert w2.job_id == job_id
    assert rpc.fail_or_retry(
        job_id,
        document_id,
        worker_id="W2",
        lease_token=w2.lease_token,
        retry=True,
        stage="retry_wait",
        error_message="t",
        batch_id=batch_id,
    ).retried
    t3 = claim_one(rpc, "W")  # the same claim loop, a new claim
    assert (t3.job_id, t3.attempt_count) == (job_id, 3)

    if not schema.hardened:
        assert (t1.lease_token, t3.lease_token) == (None, None)
        calls = zombie_calls(rpc, t1, t1_generation, batch_id)
        for name in ("heartbeat", "begin_generation", "record_stage", "commit_generation"):
            outcome = calls[name]()
            assert outcome.ok, (name, outcome)
        assert document(conn, document_id)["index_generation_id"] == t1_generation  # T1's build went live
        with conn.transaction(force_rollback=True):  # T1 could complete T3's job too ...
            assert calls["complete"]().ok
        assert calls["fail_or_retry"]().ok  # ... or fail it
        assert (job(conn, job_id)["status"], job(conn, job_id)["error_message"]) == ("failed", "zombie")
        assert rpc.heartbeat(job_id, "W", lease_token=t3.lease_token).lease_lost  # the live claim lost
        return

    assert t1.lease_token < w2.lease_token < t3.lease_token
    assert_zombie_changes_nothing(conn, rpc, t1, t1_generation, batch_id)

    assert rpc.heartbeat(job_id, "W", lease_token=t3.lease_token, progress=50).ok
    t3_generation = finish(rpc, conn, t3, batch_id, chunks=4)
    assert job(conn, job_id)["status"] == "completed"
    assert (document(conn, document_id)["index_generation_id"], document(conn, document_id)["chunk_count"]) == (
        t3_generation,
        4,
    )
    assert batch(conn, batch_id)["status"] == "completed"


def an_operator_retry_does_not_reset_the_token(schema, new_conn):
    """A final attempt expires and is dead-lettered; an operator retries the job and the
    same claim loop claims it again (attempts start over). Before: the stalled first claim
    passes the worker-id fence again. After: the new claim's token is larger and the first
    claim's token is refused everywhere."""
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id, max_attempts=1)

    first = claim_one(rpc, "W")
    first_generation = rpc.begin_generation(job_id, document_id, "W", lease_token=first.lease_token).generation_id
    make_lease_stale(conn, job_id)
    assert rpc.expire_stale().job_ids == [job_id]
    assert rpc.retry(job_id).ok
    assert job(conn, job_id)["attempt_count"] == 0
    second = claim_one(rpc, "W")
    assert (second.job_id, second.attempt_count) == (job_id, 1)

    if not schema.hardened:
        zombie = zombie_calls(rpc, first, first_generation, batch_id)
        assert zombie["heartbeat"]().ok
        assert zombie["fail_or_retry"]().ok
        assert (job(conn, job_id)["status"], job(conn, job_id)["error_message"]) == ("failed", "zombie")
        return

    assert second.lease_token > first.lease_token
    assert job(conn, job_id)["lease_token"] == second.lease_token
    assert_zombie_changes_nothing(conn, rpc, first, first_generation, batch_id)
    finish(rpc, conn, second, batch_id)
    assert job(conn, job_id)["status"] == "completed"


def final_attempt_build(rpc: AnySchemaRpc, conn, worker_id: str):
    """A batch with one job on its only attempt, claimed, its generation begun and
    written. Returns (batch_id, claim, generation_id)."""
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id, max_attempts=1)
    claim = claim_one(rpc, worker_id)
    generation_id = rpc.begin_generation(
        claim.job_id, claim.document_id, worker_id, lease_token=claim.lease_token
    ).generation_id
    write_artifacts(conn, claim.document_id, generation_id)
    return batch_id, claim, generation_id


def states(conn, claim: ClaimedJob, batch_id) -> tuple:
    return (
        job(conn, claim.job_id)["status"],
        document(conn, claim.document_id)["status"],
        batch(conn, batch_id)["status"],
    )


class JanitorInTheGap(AnySchemaRpc):
    """The worker's client, except that just before a separate completion call the lease
    runs out and the janitor expires stale leases: what happens in the gap between commit
    and complete, when there is a gap. With one transaction there is none."""

    def __init__(self, conn, janitor_conn):
        super().__init__(conn)
        self.janitor_conn = janitor_conn
        self.janitor_expired: list | None = None

    def complete(self, job_id, document_id, **kwargs):
        make_lease_stale(self.janitor_conn, job_id)
        self.janitor_expired = AnySchemaRpc(self.janitor_conn).expire_stale().job_ids
        return super().complete(job_id, document_id, **kwargs)


def a_final_attempt_is_never_dead_lettered_between_commit_and_complete(schema, new_conn):
    """The worker commits-and-completes its final attempt while the janitor expires stale
    leases. Before: two transactions; the janitor dead-letters the job between them and
    the completion is refused: an indexed document under a failed job, its batch
    completed_with_errors. After: one transaction, no gap; the janitor finds nothing
    afterwards, skips the job while it is in flight, and if it expired the job first the
    commit-and-complete is refused and nothing goes live."""
    conn = new_conn(schema.url)
    rpc = JanitorInTheGap(conn, new_conn(schema.url))
    batch_id, claim, generation_id = final_attempt_build(rpc, conn, "W")
    outcome = rpc.commit_and_complete(
        claim.job_id, claim.document_id, generation_id, worker_id="W", lease_token=claim.lease_token, batch_id=batch_id
    )

    if not schema.hardened:
        assert rpc.janitor_expired == [claim.job_id]
        assert outcome.committed and outcome.lease_lost
        assert states(conn, claim, batch_id) == ("failed", "indexed", "completed_with_errors")
        assert document(conn, claim.document_id)["index_generation_id"] == generation_id
        return

    assert outcome.ok and rpc.janitor_expired is None  # no separate completion call
    make_lease_stale(conn, claim.job_id)
    assert rpc.expire_stale().expired == 0
    assert states(conn, claim, batch_id) == ("completed", "indexed", "completed")
    assert document(conn, claim.document_id)["index_generation_id"] == generation_id

    # In flight: the lease runs out while the commit-and-complete waits for the batch row
    # (its last lock); the janitor skips the job it holds.
    batch_id, claim, generation_id = final_attempt_build(rpc, conn, "W2")
    make_lease_stale(conn, claim.job_id)
    # The barrier and its observer reach the server itself; the worker is known by its
    # application_name (through a pooler its statement runs on a server connection it is
    # handed for the call, tests/race/test_fences_through_pooler.py).
    blocker = new_conn(schema.direct_url, autocommit=False)
    blocker.execute("select 1 from import_batches where id = %s for no key update", (batch_id,))
    worker = new_conn(schema.url, application_name="in-flight-W2")
    in_flight = Background(
        lambda: AnySchemaRpc(worker).commit_and_complete(
            claim.job_id,
            claim.document_id,
            generation_id,
            worker_id="W2",
            lease_token=claim.lease_token,
            batch_id=batch_id,
        )
    )
    wait_until_client_blocked(new_conn(schema.direct_url), "in-flight-W2", by=backend_pid(blocker))
    assert AnySchemaRpc(new_conn(schema.url)).expire_stale().expired == 0
    blocker.rollback()
    assert in_flight.join().ok
    assert states(conn, claim, batch_id) == ("completed", "indexed", "completed")

    # Expiry first: the commit-and-complete is refused, nothing goes live.
    batch_id, claim, generation_id = final_attempt_build(rpc, conn, "W3")
    make_lease_stale(conn, claim.job_id)
    assert rpc.expire_stale().job_ids == [claim.job_id]
    before = snapshot(conn)
    late = rpc.commit_and_complete(
        claim.job_id, claim.document_id, generation_id, worker_id="W3", lease_token=claim.lease_token, batch_id=batch_id
    )
    assert late.lease_lost and not late.committed
    assert snapshot(conn) == before
    assert states(conn, claim, batch_id) == ("failed", "failed", "completed_with_errors")
    assert document(conn, claim.document_id)["index_generation_id"] is None


def a_shorter_stale_window_does_not_take_a_live_lease(schema, new_conn):
    """Two jobs claimed a minute ago with 300 s leases, one with attempts left, one on its
    final attempt. Before: a claimer or a janitor passing a 10 s window takes the first
    and dead-letters the second, and health and the sensor count them stale. After: the
    deadline on the row decides; the leases are taken only once it has passed."""
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    _, retried_job = seed_job(conn)
    _, final_job = seed_job(conn, max_attempts=1)
    assert {c.job_id for c in rpc.claim("holder", limit=2, stale_after_seconds=300)} == {retried_job, final_job}
    for job_id in (retried_job, final_job):
        age_lease(conn, job_id, 60)

    impatient = AnySchemaRpc(conn, stale_after_seconds=10)
    stale = impatient.queue_health(10).stale_leases
    claimable = impatient.sensor_state().claimable
    taken = impatient.claim("impatient", stale_after_seconds=10)
    expired = impatient.expire_stale(10)

    if not schema.hardened:
        assert (stale, claimable) == (2, 1)  # the final attempt is not claimable, only expirable
        assert [c.job_id for c in taken] == [retried_job]
        assert job(conn, retried_job)["locked_by"] == "impatient"
        assert expired.job_ids == [final_job]
        assert job(conn, final_job)["stage"] == "dead_letter"
        return

    assert (taken, expired.expired, stale, claimable) == ([], 0, 0, 0)
    assert job(conn, retried_job)["locked_by"] == job(conn, final_job)["locked_by"] == "holder"

    # The deadline passes (claimed 301 s ago): now both are taken, by any window.
    for job_id in (retried_job, final_job):
        age_lease(conn, job_id, 241)
    assert impatient.queue_health().stale_leases == 2
    assert [c.job_id for c in rpc.claim("patient", stale_after_seconds=3600)] == [retried_job]
    assert rpc.expire_stale(3600).job_ids == [final_job]


def commit_refuses_a_generation_the_claim_did_not_begin(schema, new_conn):
    """Two ways a second building generation of a document exists: (a) the same job's
    earlier claim began one, lost its lease, the reclaim began its own; (b) a job that
    failed left one behind and a new job of the document is claimed. Before: the current
    claim commits the other generation. After: generation_not_owned, nothing changes."""
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)

    # (a) same job, earlier claim
    document_a, job_a = seed_job(conn)
    first = claim_one(rpc, "A")
    foreign_a = rpc.begin_generation(job_a, document_a, "A", lease_token=first.lease_token).generation_id
    write_artifacts(conn, document_a, foreign_a, chunks=1)
    make_lease_stale(conn, job_a)
    reclaim = claim_one(rpc, "B")
    assert reclaim.job_id == job_a
    own_a = rpc.begin_generation(job_a, document_a, "B", lease_token=reclaim.lease_token).generation_id

    # (b) another job of the document
    document_b, failed_job = seed_job(conn, max_attempts=1)
    dead = claim_one(rpc, "C")
    foreign_b = rpc.begin_generation(failed_job, document_b, "C", lease_token=dead.lease_token).generation_id
    write_artifacts(conn, document_b, foreign_b, chunks=1)
    assert rpc.fail_or_retry(
        failed_job, document_b, worker_id="C", lease_token=dead.lease_token, error_message="parse error"
    ).ok
    assert rpc.enqueue(document_b).ok
    second = claim_one(rpc, "D")
    assert second.job_id != failed_job and second.document_id == document_b

    def commit(claim, document_id, generation_id):
        return rpc.commit_generation(
            claim.job_id, document_id, generation_id, claim.locked_by, lease_token=claim.lease_token
        )

    if not schema.hardened:
        assert commit(reclaim, document_a, foreign_a).ok
        assert commit(second, document_b, foreign_b).ok
        assert document(conn, document_a)["index_generation_id"] == foreign_a
        assert document(conn, document_b)["index_generation_id"] == foreign_b
        return

    before = snapshot(conn)
    assert commit(reclaim, document_a, foreign_a).reason == "generation_not_owned"
    assert commit(second, document_b, foreign_b).reason == "generation_not_owned"
    assert snapshot(conn) == before
    # Its own generation commits.
    assert commit(reclaim, document_a, own_a).ok
    assert document(conn, document_a)["index_generation_id"] == own_a
