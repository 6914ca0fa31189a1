"""The fence holes of the third review (issue 29, items 4, 5, 7, 8 and 9; migration
…_one_lock_order.sql).

Each test runs twice (`lock_order_schema`): just before the migration, where it observes
the hole, and at head, where it asserts the contract: a duplicate item of one bulk call
writes nothing (4); a call with neither lease token nor worker id is refused (5); a worker
may only ask for `failed` as its document's status (7); stage rows come only from the
current lease (8); bulk acknowledgements take at most 1,000 items (9). The SQL functions
are called directly (named notation) where the client would not send what the test needs.
"""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from psycopg.types.json import Jsonb

from ingestion_pipeline.db.models import ClaimedJob, CompleteItem, FailItem
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import (
    batch,
    document,
    index_document,
    job,
    make_lease_stale,
    searchable,
    seed_batch,
    seed_job,
    snapshot,
    write_artifacts,
)

BULK_CAP = 1000


def bulk(conn: psycopg.Connection, function: str, items: list[dict]) -> dict:
    """One call of complete_ingestion_jobs or fail_or_retry_ingestion_jobs, as sent."""
    return conn.execute(f"select {function}(p_items => %s) as result", (Jsonb(items),)).fetchone()["result"]


def item(claim: ClaimedJob, **fields) -> dict:
    return {
        "job_id": str(claim.job_id),
        "document_id": str(claim.document_id),
        "lease_token": claim.lease_token,
        **fields,
    }


def by_item(answer: dict) -> dict[int, dict]:
    return {result["item"]: result for result in answer["results"]}


def generation_status(conn: psycopg.Connection, generation_id) -> str:
    return conn.execute("select status from index_generations where id = %s", (generation_id,)).fetchone()["status"]


def stage_rows(conn: psycopg.Connection, job_id) -> list[str]:
    return [
        r["stage"]
        for r in conn.execute(
            "select stage from ingestion_job_stages where job_id = %s order by id", (job_id,)
        ).fetchall()
    ]


def record_stage(rpc: AnySchemaRpc, claim: ClaimedJob, stage: str = "parse"):
    now = datetime.now(UTC)
    return rpc.record_stage(
        claim.job_id, claim.locked_by, stage, started_at=now, finished_at=now, lease_token=claim.lease_token
    )


# -- 4. a duplicate item of a bulk acknowledgement ---------------------------------------


def test_a_second_item_of_a_job_in_one_bulk_completion_writes_nothing(lock_order_schema, new_conn):
    """One claim begins two generations (g1, g2) and sends one complete_ingestion_jobs with
    an item for each. Before: item 1 is answered committed g1, item 2 lease_lost, yet g2 was
    committed after it (the duplicate check ran after the commit): the document points at
    g2 and g1 is superseded. Head: item 2 is `duplicate_item` and nothing of it is written
    (g2 stays building, no stage row of it); the document keeps g1, committed."""
    conn = new_conn(lock_order_schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id)
    [claim] = rpc.claim("W")
    g1, g2 = (
        rpc.begin_generation(job_id, document_id, "W", lease_token=claim.lease_token).generation_id for _ in range(2)
    )
    write_artifacts(conn, document_id, g1, word="marigold")
    write_artifacts(conn, document_id, g2, word="juniper")
    now = datetime.now(UTC).isoformat()
    second_stages = [{"stage": "second_item", "started_at": now, "finished_at": now}]

    answer = bulk(
        conn,
        "complete_ingestion_jobs",
        [item(claim, generation_id=str(g1)), item(claim, generation_id=str(g2), worker_id="W", stages=second_stages)],
    )
    first, second = by_item(answer)[1], by_item(answer)[2]

    assert (first["ok"], first["committed"], first["generation_id"]) == (True, True, str(g1))
    assert (job(conn, job_id)["status"], batch(conn, batch_id)["completed_files"]) == ("completed", 1)
    assert "second_item" not in stage_rows(conn, job_id)
    if not lock_order_schema.hardened:  # the answer says g1; the document says g2
        assert (second["ok"], second["reason"]) == (False, "lease_lost")
        assert document(conn, document_id)["index_generation_id"] == g2
        assert (generation_status(conn, g1), generation_status(conn, g2)) == ("superseded", "committed")
        assert searchable(conn, document_id, "juniper") and not searchable(conn, document_id, "marigold")
        return
    assert (second["ok"], second["reason"]) == (False, "duplicate_item")
    assert document(conn, document_id)["index_generation_id"] == g1
    assert (generation_status(conn, g1), generation_status(conn, g2)) == ("committed", "building")
    assert searchable(conn, document_id, "marigold") and not searchable(conn, document_id, "juniper")


def test_a_second_item_of_a_job_in_one_bulk_failure_is_a_duplicate(lock_order_schema, new_conn):
    """Two items of one job and token in one fail_or_retry_ingestion_jobs: a retry, then a
    final failure. Item 1 retries the job in both schemas. Before: item 2 is answered
    `lease_lost` (the claim still held the lease when it sent it); head: `duplicate_item`.
    Either way item 2 changes nothing: the job is pending with item 1's message."""
    conn = new_conn(lock_order_schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    _, job_id = seed_job(conn, batch_id)
    [claim] = rpc.claim("W")

    answer = bulk(
        conn,
        "fail_or_retry_ingestion_jobs",
        [item(claim, retry=True, error_message="transient"), item(claim, retry=False, error_message="final")],
    )
    first, second = by_item(answer)[1], by_item(answer)[2]

    assert (first["ok"], first["retried"]) == (True, True)
    assert (job(conn, job_id)["status"], job(conn, job_id)["error_message"]) == ("pending", "transient")
    assert (batch(conn, batch_id)["open_files"], batch(conn, batch_id)["failed_files"]) == (1, 0)
    assert (second["ok"], second["reason"]) == (
        (False, "duplicate_item") if lock_order_schema.hardened else (False, "lease_lost")
    )


# -- 5. neither lease token nor worker id ------------------------------------------------

BEGIN_UNFENCED = (
    "select begin_document_index_generation(p_job_id => %(job)s, p_document_id => %(document)s, "
    "p_worker_id => null, p_lease_token => null) as result"
)


def test_a_session_that_never_claimed_cannot_build_or_complete_the_job(lock_order_schema, new_conn):
    """Worker W holds the claim. Another session, which never claimed, calls begin with
    neither token nor worker id, writes rows, commits and completes with the old 4-argument
    complete_ingestion_job. Before: every call is accepted, search answers the intruder's
    chunk and W's next call is lease_lost. Head: the first call raises 22023, nothing
    changes, and W builds and completes the job normally."""
    holder_conn, intruder = new_conn(lock_order_schema.url), new_conn(lock_order_schema.url)
    holder = AnySchemaRpc(holder_conn)
    batch_id = seed_batch(holder_conn)
    document_id, job_id = seed_job(holder_conn, batch_id)
    [claim] = holder.claim("W")
    ids = {"job": job_id, "document": document_id, "batch": batch_id}

    if not lock_order_schema.hardened:
        began = intruder.execute(BEGIN_UNFENCED, ids).fetchone()["result"]
        assert began["ok"], began
        write_artifacts(intruder, document_id, began["generation_id"], word="intruder")  # the fence lets them in
        committed = intruder.execute(
            "select commit_document_index_generation(p_job_id => %(job)s, p_document_id => %(document)s, "
            "p_generation_id => %(generation)s, p_worker_id => null) as result",
            {**ids, "generation": began["generation_id"]},
        ).fetchone()["result"]
        assert committed["ok"], committed
        completed = intruder.execute(
            "select complete_ingestion_job(%(job)s, %(document)s, %(batch)s, 'indexed') as result", ids
        ).fetchone()["result"]
        assert completed["ok"], completed
        assert searchable(holder_conn, document_id, "intruder")
        assert holder.begin_generation(job_id, document_id, "W", lease_token=claim.lease_token).lease_lost
        return

    before = snapshot(holder_conn)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        intruder.execute(BEGIN_UNFENCED, ids)
    assert snapshot(holder_conn) == before
    generation_id = holder.begin_generation(job_id, document_id, "W", lease_token=claim.lease_token).generation_id
    write_artifacts(holder_conn, document_id, generation_id, word="holder")
    done = holder.commit_and_complete(job_id, document_id, generation_id, worker_id="W", lease_token=claim.lease_token)
    assert done.ok, done
    assert searchable(holder_conn, document_id, "holder") and not searchable(holder_conn, document_id, "intruder")


UNFENCED_CALLS = {  # call with neither token nor worker id -> head raises 22023
    "begin_generation": BEGIN_UNFENCED,
    "commit_generation": "select commit_document_index_generation(p_job_id => %(job)s, "
    "p_document_id => %(document)s, p_generation_id => %(generation)s, p_worker_id => null, "
    "p_lease_token => null) as result",
    "complete_4_arguments": "select complete_ingestion_job(%(job)s, %(document)s, %(batch)s, 'indexed') as result",
    "complete": "select complete_ingestion_job(p_job_id => %(job)s, p_document_id => %(document)s, "
    "p_worker_id => null, p_lease_token => null) as result",
    "fail_or_retry": "select fail_or_retry_ingestion_job(p_job_id => %(job)s, p_document_id => %(document)s, "
    "p_error_message => 'intruder', p_worker_id => null, p_lease_token => null) as result",
}
LEASE_LOST_CALLS = {  # already refused before the migration; kept so at head
    "heartbeat": "select heartbeat_ingestion_job(p_job_id => %(job)s, p_worker_id => null, p_progress => 99, "
    "p_lease_token => null) as result",
    "record_stage": "select record_ingestion_job_stage(p_job_id => %(job)s, p_worker_id => null, "
    "p_stage => 'intruder', p_started_at => now(), p_lease_token => null) as result",
}


@pytest.mark.parametrize("name", [*UNFENCED_CALLS, *LEASE_LOST_CALLS])
def test_a_fenced_call_with_neither_token_nor_worker_id_is_refused(lock_order_schema, new_conn, name):
    """While W holds the claim (its generation begun), a call with both p_worker_id and
    p_lease_token null. Before: begin, commit, complete (either form) and fail_or_retry are
    accepted; heartbeat and the stage log answer lease_lost. Head: the first five raise
    22023 and change nothing; heartbeat and the stage log still answer lease_lost."""
    conn = new_conn(lock_order_schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id)
    [claim] = rpc.claim("W")
    generation_id = rpc.begin_generation(job_id, document_id, "W", lease_token=claim.lease_token).generation_id
    params = {"job": job_id, "document": document_id, "batch": batch_id, "generation": generation_id}
    before, logged = snapshot(conn), stage_rows(conn, job_id)

    if name in LEASE_LOST_CALLS:
        answer = conn.execute(LEASE_LOST_CALLS[name], params).fetchone()["result"]
        assert (answer["ok"], answer["reason"]) == (False, "lease_lost")
    elif not lock_order_schema.hardened:
        answer = conn.execute(UNFENCED_CALLS[name], params).fetchone()["result"]
        assert answer["ok"], answer  # the hole: nothing checked who calls
        assert snapshot(conn) != before
        return
    else:
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute(UNFENCED_CALLS[name], params)
    assert snapshot(conn) == before
    assert stage_rows(conn, job_id) == logged
    assert rpc.heartbeat(job_id, "W", lease_token=claim.lease_token).ok  # W still holds it


# -- 7. the document status a worker may ask for -----------------------------------------


@pytest.mark.parametrize("form", ["bulk", "single"])
@pytest.mark.parametrize("status", ["indexed", "deleted", "cancelled", "processing"])
def test_a_worker_may_only_ask_for_a_failed_document(lock_order_schema, new_conn, status, form):
    """A final failure whose `document_status` is not `failed`: in a bulk call next to a
    valid item of another job, or through fail_or_retry_ingestion_job. Before: accepted
    (ok: true) and the document is stored in that status: `indexed` with no generation,
    `deleted` with deleted_at null, `cancelled` or `processing` under a failed job. Head:
    the whole call raises 22023 and nothing changes; the same items with `failed` (or no
    status) then go through."""
    conn = new_conn(lock_order_schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    for _ in range(2):
        seed_job(conn, batch_id)
    bad, good = rpc.claim("W", limit=2)

    def fail(document_status: str | None) -> dict:
        if form == "single":
            return conn.execute(
                "select fail_or_retry_ingestion_job(p_job_id => %s, p_document_id => %s, p_document_status => %s, "
                "p_error_message => 'broken', p_lease_token => %s) as result",
                (bad.job_id, bad.document_id, document_status, bad.lease_token),
            ).fetchone()["result"]
        return bulk(
            conn,
            "fail_or_retry_ingestion_jobs",
            [item(bad, error_message="broken", document_status=document_status), item(good, error_message="broken")],
        )  # no document_status: `failed`

    if not lock_order_schema.hardened:
        answer = fail(status)
        assert answer["ok"] and all(r["ok"] for r in answer.get("results", [answer])), answer
        stored = document(conn, bad.document_id)
        assert (stored["status"], stored["index_generation_id"], stored["deleted_at"]) == (status, None, None)
        assert job(conn, bad.job_id)["status"] == "failed"
        return

    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        fail(status)
    assert snapshot(conn) == before
    answer = fail("failed")
    assert answer["ok"] and all(r["ok"] for r in answer.get("results", [answer])), answer
    assert document(conn, bad.document_id)["status"] == "failed"


# -- 8. stage rows only from the current lease -------------------------------------------


def test_a_dead_lettered_claim_writes_no_stage_row_once_its_job_is_superseded(lock_order_schema, new_conn):
    """A claim on its final attempt stalls and is dead-lettered; its stage row at the old
    token is refused. The document is uploaded again and the new job is indexed, which
    settles the old job as completed/superseded. Before: the zombie's same call is now
    accepted, as often as it likes, and writes rows. Head: lease_lost, no row."""
    conn = new_conn(lock_order_schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    document_id, job_id = seed_job(conn, batch_id, max_attempts=1)
    [zombie] = rpc.claim("Z")
    make_lease_stale(conn, job_id)
    assert rpc.expire_stale().job_ids == [job_id]
    assert (job(conn, job_id)["status"], job(conn, job_id)["stage"]) == ("failed", "dead_letter")
    assert record_stage(rpc, zombie).lease_lost  # refused while dead-lettered

    assert rpc.enqueue(document_id, batch_id=batch_id).ok  # the re-upload
    index_document(rpc, conn, worker_id="W2")
    assert (job(conn, job_id)["status"], job(conn, job_id)["stage"]) == ("completed", "superseded")

    answers = [record_stage(rpc, zombie, stage) for stage in ("parse", "chunk")]
    if not lock_order_schema.hardened:
        assert all(answer.ok for answer in answers)
        assert stage_rows(conn, job_id) == ["parse", "chunk"]
        return
    assert all(answer.lease_lost for answer in answers)
    assert stage_rows(conn, job_id) == []


def test_no_stage_row_after_the_job_completed(lock_order_schema, new_conn):
    """The holder completes its job, then records a stage at its token. Before: accepted
    (the fence takes `completed`), a row after the job's end. Head: lease_lost, no row."""
    conn = new_conn(lock_order_schema.url)
    rpc = AnySchemaRpc(conn)
    _, job_id = seed_job(conn, seed_batch(conn))
    [claim] = rpc.claim("W")
    assert rpc.complete(claim.job_id, claim.document_id, worker_id="W", lease_token=claim.lease_token).ok

    answer = record_stage(rpc, claim, "late")
    if not lock_order_schema.hardened:
        assert answer.ok and stage_rows(conn, job_id) == ["late"]
        return
    assert answer.lease_lost and stage_rows(conn, job_id) == []


# -- 9. bulk acknowledgements take at most 1,000 items -----------------------------------


def claimed_jobs(conn: psycopg.Connection, count: int) -> list[ClaimedJob]:
    """`count` documents of one batch, each with a pending job, all claimed by W (seeded in
    a few statements: the test is about the acknowledgement)."""
    batch_id = seed_batch(conn)
    ids = [
        r["id"]
        for r in conn.execute(
            "insert into documents (batch_id, source_name, mime_type, content_sha256, byte_size) "
            "select %s, 'bulk-' || i || '.txt', 'text/plain', "
            "       encode(sha256(convert_to('bulk ' || i, 'UTF8')), 'hex'), 6 "
            "  from generate_series(1, %s) i returning id",
            (batch_id, count),
        ).fetchall()
    ]
    enqueued = conn.execute(
        "select count(*) filter (where (enqueue_ingestion_job(p_document_id => d, "
        "p_batch_id => %s) ->> 'ok')::boolean) as n from unnest(%s::uuid[]) d",
        (batch_id, ids),
    ).fetchone()["n"]
    assert enqueued == count
    claims = AnySchemaRpc(conn).claim("W", limit=count)
    assert len(claims) == count
    return claims


def processing(conn: psycopg.Connection) -> int:
    return conn.execute("select count(*) as n from ingestion_jobs where status = 'processing'").fetchone()["n"]


ACKS = {
    "complete": ("complete_ingestion_jobs", {}),
    "fail": ("fail_or_retry_ingestion_jobs", {"retry": False, "error_message": "broken"}),
}


@pytest.mark.parametrize("ack", list(ACKS))
def test_a_bulk_acknowledgement_takes_at_most_1000_items(lock_order_schema, new_conn, ack):
    """1,001 claimed jobs acknowledged in one call. Before: accepted, every job settled.
    Head: 22023 and nothing changes; 1,000 of them in one call are accepted."""
    conn = new_conn(lock_order_schema.url)
    function, fields = ACKS[ack]
    items = [item(claim, **fields) for claim in claimed_jobs(conn, BULK_CAP + 1)]

    if not lock_order_schema.hardened:
        answer = bulk(conn, function, items)
        assert len(answer["results"]) == BULK_CAP + 1 and all(r["ok"] for r in answer["results"])
        assert processing(conn) == 0
        return
    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        bulk(conn, function, items)
    assert snapshot(conn) == before
    answer = bulk(conn, function, items[:BULK_CAP])
    assert len(answer["results"]) == BULK_CAP and all(r["ok"] for r in answer["results"])
    assert processing(conn) == 1


@pytest.mark.parametrize("ack", list(ACKS))
def test_the_client_acknowledges_more_than_1000_items(lock_order_schema, new_conn, ack):
    """AckRpc.complete_many / fail_or_retry_many with 1,001 items: one answer per item, in
    order, every job settled. At head that needs the client to split the list into calls of
    at most 1,000 (one call would be refused); before, one call took them all."""
    conn = new_conn(lock_order_schema.url)
    rpc = AnySchemaRpc(conn)
    claims = claimed_jobs(conn, BULK_CAP + 1)
    if ack == "complete":
        answers = rpc.complete_many("W", [CompleteItem(c.job_id, c.document_id, c.lease_token) for c in claims])
    else:
        answers = rpc.fail_or_retry_many(
            "W", [FailItem(c.job_id, c.document_id, c.lease_token, error_message="broken") for c in claims]
        )
    assert [a.job_id for a in answers] == [c.job_id for c in claims]
    assert all(a.ok for a in answers)
    assert processing(conn) == 0
