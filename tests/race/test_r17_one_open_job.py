"""R17: one open job per document, and a second enqueue of a document that has one is
answered, not raised.

The partial unique index `ingestion_jobs_one_open_per_document` is in the core schema,
so "at most one open job" holds on both schemas and cannot tell them apart. What the
hardening changed is what the second enqueue gets: the naive `enqueue_ingestion_job`
inserts without ON CONFLICT, so the index refuses the row with a UniqueViolation (23505)
that aborts the caller's transaction (and, through the client, the whole `ingest
enqueue` run); at head it answers `{"ok": false, "reason": "already_queued", "job_id":
<the open job>}` and the caller carries on. Each test runs on the pre-hardening schema
(where it observes the error) and at head (where it observes the answer).
"""

import uuid

import psycopg
import pytest

from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import Background, backend_pid, seed_batch, seed_document, wait_until_blocked


def open_jobs(conn, document_id) -> list:
    return [
        r["id"]
        for r in conn.execute(
            "select id from ingestion_jobs where document_id = %s and status in ('pending', 'processing')",
            (document_id,),
        ).fetchall()
    ]


def test_a_second_enqueue_of_a_queued_document(schema, new_conn):
    conn = new_conn(schema.url)
    batch_id = seed_batch(conn)
    document_id = seed_document(conn, batch_id)
    rpc = AnySchemaRpc(conn)
    first = rpc.enqueue(document_id, batch_id=batch_id)
    assert first.ok

    if schema.hardened:
        again = rpc.enqueue(document_id, batch_id=batch_id, kind="reindex")
        assert (again.ok, again.reason, again.job_id) == (False, "already_queued", first.job_id)
    else:
        # The bug: the index refuses the insert and the error reaches the caller.
        with pytest.raises(psycopg.errors.UniqueViolation, match="ingestion_jobs_one_open_per_document"):
            rpc.enqueue(document_id, batch_id=batch_id, kind="reindex")
    assert open_jobs(conn, document_id) == [first.job_id]


def test_a_second_enqueue_inside_a_caller_transaction_leaves_it_usable(schema, new_conn):
    """The caller enqueues several documents in one transaction: at head an already-queued
    one is skipped and the others commit; before the hardening the error aborts the
    transaction and the document enqueued before it is lost with it."""
    setup = new_conn(schema.url)
    queued, fresh = seed_document(setup), seed_document(setup)
    existing = AnySchemaRpc(setup).enqueue(queued)
    assert existing.ok

    tx = new_conn(schema.url, autocommit=False)
    rpc = AnySchemaRpc(tx)
    assert rpc.enqueue(fresh).ok
    if schema.hardened:
        assert rpc.enqueue(queued).reason == "already_queued"
        tx.commit()
        assert len(open_jobs(setup, fresh)) == 1
    else:
        with pytest.raises(psycopg.errors.UniqueViolation):
            rpc.enqueue(queued)
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            tx.execute("select 1")
        tx.rollback()
        assert open_jobs(setup, fresh) == []
    assert open_jobs(setup, queued) == [existing.job_id]


def test_concurrent_enqueues_make_one_open_job(schema, new_conn):
    """Two enqueues of one document in overlapping transactions: the second waits on the
    unique index for the first to commit, then sees its row."""
    setup = new_conn(schema.url)
    document_id = seed_document(setup)

    first_tx = new_conn(schema.url, autocommit=False)
    first_tx.execute("select 1")
    first = AnySchemaRpc(first_tx).enqueue(document_id)
    assert first.ok

    second_conn = new_conn(schema.url)
    second_pid = backend_pid(second_conn)
    second = Background(lambda: AnySchemaRpc(second_conn).enqueue(document_id))
    wait_until_blocked(setup, second_pid, by=backend_pid(first_tx))  # on the unique index
    first_tx.commit()

    if schema.hardened:
        outcome = second.join()
        assert (outcome.ok, outcome.reason, outcome.job_id) == (False, "already_queued", first.job_id)
    else:
        # The bug: the loser of the race gets the index's error instead of an answer.
        with pytest.raises(psycopg.errors.UniqueViolation, match="ingestion_jobs_one_open_per_document"):
            second.join()
    assert open_jobs(setup, document_id) == [first.job_id]


def test_a_concurrent_enqueue_proceeds_when_the_first_rolls_back(schema, new_conn):
    """The waiting enqueue is not refused for a job that never committed (both schemas)."""
    setup = new_conn(schema.url)
    document_id = seed_document(setup)

    first_tx = new_conn(schema.url, autocommit=False)
    first_tx.execute("select 1")
    assert AnySchemaRpc(first_tx).enqueue(document_id).ok

    second_conn = new_conn(schema.url)
    second_pid = backend_pid(second_conn)
    second = Background(lambda: AnySchemaRpc(second_conn).enqueue(document_id))
    wait_until_blocked(setup, second_pid, by=backend_pid(first_tx))
    first_tx.rollback()

    outcome = second.join()
    assert outcome.ok
    assert open_jobs(setup, document_id) == [outcome.job_id]


def test_enqueue_of_an_unknown_document_is_refused(schema, new_conn):
    conn = new_conn(schema.url)
    if schema.hardened:
        outcome = AnySchemaRpc(conn).enqueue(uuid.uuid4())
        assert (outcome.ok, outcome.reason) == (False, "document_not_found")
    else:
        # Before the hardening the foreign key refuses the insert and the error is raised.
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            AnySchemaRpc(conn).enqueue(uuid.uuid4())
