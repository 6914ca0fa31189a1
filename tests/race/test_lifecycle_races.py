"""The document lifecycle against workers in flight (migration …_document_lifecycle.sql).

An operator deletes a document, or cancels an import batch, while a worker is building it:
between begin and commit, between commit and complete, in the middle of its COPY, or while
a claim of it is in flight. Each interleaving is forced with row or advisory locks observed
through pg_blocking_pids; none relies on a sleep for ordering.

Each test runs twice (`lifecycle_schema`). Before the migration there is no delete or cancel
RPC: an operator did it by hand (`operator_delete`, `operator_cancel`), and the test observes
the bug: the worker is never told, its later calls are accepted, the document comes back or
rows of it outlive the cleanup, the job of a cancelled batch gets indexed, the batch's
counters drift. At head the delete/cancel is one transaction that cancels the open job: every
later fenced call of the worker is refused (lease_lost), its rows are refused by the
artifact fence (IF001) or removed by the janitor's cleanup, and nothing of a deleted
document is ever searchable again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

import psycopg
import pytest

from ingestion_pipeline.db.models import ClaimedJob
from ingestion_pipeline.processing import Chunk, ParsedDocument
from ingestion_pipeline.processing.model import Page, Section
from ingestion_pipeline.worker.artifacts import write_generation
from tests.any_schema_rpc import AnySchemaRpc
from tests.conftest import Schema
from tests.helpers import (
    Background,
    backend_pid,
    batch,
    document,
    document_rows,
    failing_index_checks,
    index_document,
    job,
    searchable,
    seed_batch,
    seed_job,
    wait_until_blocked,
    write_artifacts,
)

WORD = "zephyr"  # in every artifact row the tests write: what the search looks for
FENCE_REFUSED = "IF001"
BARRIER_KEY = 190_001  # the advisory lock that holds a worker's COPY mid-way
NOTHING_LEFT = {
    "document_pages": 0,
    "document_sections": 0,
    "document_chunks": 0,
    "index_generations": 0,
    "document_sources": 0,
}


# -- the delete and the cancel, as each schema offers them -------------------------------


def operator_delete(conn: psycopg.Connection, document_id: UUID) -> None:
    """Before the lifecycle migration: what an operator could do by hand, in one
    transaction (the document leaves search through deleted_at; its rows and bytes go)."""
    with conn.transaction():
        conn.execute(
            "update documents set deleted_at = now(), index_generation_id = null, status = 'failed', "
            "error_message = 'deleted by operator', updated_at = now() where id = %s",
            (document_id,),
        )
        for table in ("document_pages", "document_sections", "document_chunks", "document_sources"):
            conn.execute(f"delete from {table} where document_id = %s", (document_id,))


def delete(schema: Schema, conn: psycopg.Connection, document_id: UUID):
    if not schema.hardened:
        operator_delete(conn, document_id)
        return None
    result = AnySchemaRpc(conn).delete_document(document_id)
    assert result.ok, result
    return result


def operator_cancel(conn: psycopg.Connection, batch_id: UUID) -> None:
    """Before the lifecycle migration: fail the batch's pending jobs by hand."""
    conn.execute(
        "update ingestion_jobs set status = 'failed', stage = 'failed', error_message = 'cancelled', "
        "completed_at = now(), updated_at = now() where batch_id = %s and status = 'pending'",
        (batch_id,),
    )


def cancel(schema: Schema, conn: psycopg.Connection, batch_id: UUID):
    if not schema.hardened:
        operator_cancel(conn, batch_id)
        return None
    return AnySchemaRpc(conn).cancel_batch(batch_id)


def cleanup(conn: psycopg.Connection):
    result = AnySchemaRpc(conn).cleanup_generations(dry_run=False)
    assert result.ok, result
    return result


def counters(conn: psycopg.Connection, batch_id: UUID) -> dict:
    row = batch(conn, batch_id)
    keys = ["status", "total_files", "open_files", "completed_files", "failed_files"]
    return {key: row[key] for key in keys + (["cancelled_files"] if "cancelled_files" in row else [])}


# -- a worker holding one claim ----------------------------------------------------------


@dataclass
class Worker:
    rpc: AnySchemaRpc
    claim: ClaimedJob

    @classmethod
    def claiming(cls, conn: psycopg.Connection, worker_id: str = "W") -> Worker:
        rpc = AnySchemaRpc(conn)
        [claimed] = rpc.claim(worker_id)
        return cls(rpc, claimed)

    @property
    def ids(self) -> tuple[UUID, UUID]:
        return self.claim.job_id, self.claim.document_id

    def heartbeat(self):
        return self.rpc.heartbeat(
            self.claim.job_id, self.claim.locked_by, lease_token=self.claim.lease_token, progress=50, stage="chunking"
        )

    def begin(self):
        return self.rpc.begin_generation(*self.ids, self.claim.locked_by, lease_token=self.claim.lease_token)

    def commit(self, generation_id: UUID):
        return self.rpc.commit_generation(
            *self.ids, generation_id, self.claim.locked_by, lease_token=self.claim.lease_token
        )

    def complete(self):
        return self.rpc.complete(*self.ids, worker_id=self.claim.locked_by, lease_token=self.claim.lease_token)

    def fail(self):
        return self.rpc.fail_or_retry(
            *self.ids,
            worker_id=self.claim.locked_by,
            lease_token=self.claim.lease_token,
            retry=True,
            error_message="parser crashed",
        )


class Build(NamedTuple):
    operator: psycopg.Connection
    batch_id: UUID
    document_id: UUID
    job_id: UUID
    worker_conn: psycopg.Connection
    worker: Worker
    generation_id: UUID


def begun_build(schema: Schema, new_conn) -> Build:
    """One job of a new batch, claimed by a worker on a connection of its own, its
    generation begun (no rows written yet); the operator acts on another connection."""
    operator = new_conn(schema.url)
    batch_id = seed_batch(operator)
    document_id, job_id = seed_job(operator, batch_id)
    worker_conn = new_conn(schema.url)
    worker = Worker.claiming(worker_conn)
    return Build(operator, batch_id, document_id, job_id, worker_conn, worker, worker.begin().generation_id)


def insert_late_chunk(conn: psycopg.Connection, document_id: UUID, generation_id: UUID) -> None:
    conn.execute(
        "insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count) "
        "values (%s, %s, 99, %s, 3)",
        (document_id, generation_id, f"late chunk {WORD}"),
    )


def assert_fence_refuses(write, *args) -> None:
    with pytest.raises(psycopg.DatabaseError) as refused:
        write(*args)
    assert refused.value.sqlstate == FENCE_REFUSED, refused.value


def assert_refused_everywhere(worker: Worker, generation_id: UUID | None) -> None:
    """Every later fenced call of the worker is refused as a lost lease."""
    assert worker.heartbeat().lease_lost
    if generation_id is None:
        assert worker.begin().lease_lost
    else:
        assert worker.commit(generation_id).lease_lost
    assert worker.complete().lease_lost
    assert worker.fail().lease_lost


def assert_cancelled(conn, job_id: UUID, why: str) -> None:
    row = job(conn, job_id)
    assert (row["status"], row["stage"], row["error_message"]) == ("cancelled", "cancelled", why), row
    assert row["completed_at"] is not None


def assert_deleted(conn, document_id: UUID) -> None:
    row = document(conn, document_id)
    assert row["status"] == "deleted" and row["deleted_at"] is not None and row["index_generation_id"] is None, row


# -- 1. delete vs a worker between begin_generation and commit ---------------------------


def test_delete_refuses_a_worker_between_begin_and_commit(lifecycle_schema, new_conn):
    """The worker claimed, began its generation and wrote its rows; the delete commits.
    Head: the job is cancelled, every later call of the worker is refused, a late row is
    refused by the fence, the document never shows in search and the cleanup leaves no row
    of it. Before: the worker is not told: its late row, its commit and its completion are
    accepted, the deleted document is `indexed` again and its rows outlive the cleanup."""
    schema = lifecycle_schema
    operator, batch_id, document_id, job_id, worker_conn, worker, generation_id = begun_build(schema, new_conn)
    write_artifacts(worker_conn, document_id, generation_id, word=WORD)
    assert not searchable(operator, document_id, WORD)  # not committed yet

    deleted = delete(schema, operator, document_id)

    if not schema.hardened:
        insert_late_chunk(worker_conn, document_id, generation_id)
        assert worker.heartbeat().ok
        assert worker.commit(generation_id).ok
        assert worker.complete().ok
        back = document(operator, document_id)
        assert (back["status"], back["index_generation_id"], back["chunk_count"]) == ("indexed", generation_id, 1)
        cleanup(operator)
        left = document_rows(operator, document_id)
        assert left["index_generations"] == 1 and left["document_chunks"] == 1
        return

    assert (deleted.cancelled_job_id, deleted.in_flight, deleted.purged) == (job_id, True, False), deleted
    assert_cancelled(operator, job_id, "document deleted")
    assert_deleted(operator, document_id)
    assert_fence_refuses(insert_late_chunk, worker_conn, document_id, generation_id)
    assert_refused_everywhere(worker, generation_id)
    assert_deleted(operator, document_id)
    assert not searchable(operator, document_id, WORD)
    assert counters(operator, batch_id) == {
        "status": "completed",
        "total_files": 1,
        "open_files": 0,
        "completed_files": 0,
        "failed_files": 0,
        "cancelled_files": 1,
    }
    cleaned = cleanup(operator)
    assert (cleaned.generations, cleaned.chunks, cleaned.sources) == (1, 3, 1), cleaned
    assert document_rows(operator, document_id) == NOTHING_LEFT
    assert failing_index_checks(schema.url, operator) == []


# -- 2. delete vs a worker between commit and complete -----------------------------------


def test_delete_refuses_a_worker_between_commit_and_complete(lifecycle_schema, new_conn):
    """The worker committed its generation (the document is searchable) but has not
    completed the job when the delete commits. Head: the document leaves search at once,
    the completion (and heartbeat, fail) is refused, the cleanup leaves no row. Before: the
    completion is accepted (a deleted document's job counts as completed) and its committed
    generation is never cleaned up."""
    schema = lifecycle_schema
    operator, batch_id, document_id, job_id, worker_conn, worker, generation_id = begun_build(schema, new_conn)
    write_artifacts(worker_conn, document_id, generation_id, word=WORD)
    assert worker.commit(generation_id).ok
    assert searchable(operator, document_id, WORD)

    deleted = delete(schema, operator, document_id)
    assert not searchable(operator, document_id, WORD)

    if not schema.hardened:
        assert worker.complete().ok
        assert job(operator, job_id)["status"] == "completed"
        assert counters(operator, batch_id)["completed_files"] == 1
        cleanup(operator)
        assert document_rows(operator, document_id)["index_generations"] == 1  # the committed one, forever
        return

    assert (deleted.cancelled_job_id, deleted.in_flight, deleted.purged) == (job_id, True, False), deleted
    assert_cancelled(operator, job_id, "document deleted")
    assert_deleted(operator, document_id)
    assert worker.heartbeat().lease_lost
    assert worker.complete().lease_lost
    assert worker.fail().lease_lost
    assert worker.commit(generation_id).lease_lost
    assert_deleted(operator, document_id)
    assert conn_scalar(operator, "select status from index_generations where id = %s", generation_id) == "abandoned"
    assert not searchable(operator, document_id, WORD)
    assert counters(operator, batch_id) == {
        "status": "completed",
        "total_files": 1,
        "open_files": 0,
        "completed_files": 0,
        "failed_files": 0,
        "cancelled_files": 1,
    }
    cleanup(operator)
    assert document_rows(operator, document_id) == NOTHING_LEFT
    assert failing_index_checks(schema.url, operator) == []


def conn_scalar(conn, sql: str, *params):
    row = conn.execute(sql, params).fetchone()
    return None if row is None else next(iter(row.values()))


# -- 3. delete during the worker's COPY --------------------------------------------------


def parsed_document() -> tuple[ParsedDocument, list[Chunk]]:
    pages = [Page(ordinal=i, text=f"page {i} {WORD}") for i in range(2)]
    sections = [
        Section(ordinal=i, heading=f"Section {i}", level=1, page_ordinal=i, text=f"section {i} {WORD}")
        for i in range(2)
    ]
    chunks = [
        Chunk(ordinal=i, section_ordinal=i % 2, page_ordinal=i % 2, text=f"chunk {i} about {WORD}", token_count=3)
        for i in range(3)
    ]
    return ParsedDocument(title="Lifecycle", mime_type="text/plain", pages=pages, sections=sections), chunks


def done_or_blocked(observer: psycopg.Connection, call: Background, pid: int, by: int, timeout: float = 15.0) -> str:
    """Wait until `call` (running on backend `pid`) has finished, or is blocked on `by`:
    an observation of a state, not an ordering (either is allowed by the lifecycle's design)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not call.thread.is_alive():
            return "done"
        if by in observer.execute("select pg_blocking_pids(%s) as b", (pid,)).fetchone()["b"]:
            return "blocked"
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} neither finished nor blocked on {by}")


# The lease checks of write_generation: before the pages' COPY, after it, after the
# sections', after the chunks' (the transaction then only has to commit).
PAUSES = {"after_pages": 2, "after_last_copy": 4}


@pytest.mark.parametrize("pause", sorted(PAUSES))
def test_delete_during_the_workers_copy(lifecycle_schema, new_conn, pause):
    """The worker's COPY transaction is held (an advisory lock taken at one of its lease
    checks, between two COPYs or after the last) when the delete runs. The delete may wait
    for the COPY transaction or commit first; both are allowed. Head: a COPY that still has
    a statement to run is refused (IF001: all of it rolls back); rows written before the
    delete stay out of search and the cleanup removes them; the worker's commit is refused.
    Before: the COPY lands and the worker's commit brings the document back."""
    schema = lifecycle_schema
    operator, batch_id, document_id, job_id, worker_conn, worker, generation_id = begun_build(schema, new_conn)

    barrier = new_conn(schema.url, autocommit=False)
    barrier.execute("select pg_advisory_xact_lock(%s)", (BARRIER_KEY,))
    checks = []

    def lease_check():  # hold the COPY's transaction at the chosen check
        checks.append(len(checks))
        if len(checks) == PAUSES[pause]:
            worker_conn.execute("select pg_advisory_xact_lock_shared(%s)", (BARRIER_KEY,))

    parsed, chunks = parsed_document()
    worker_pid, barrier_pid = backend_pid(worker_conn), backend_pid(barrier)
    copying = Background(
        lambda: write_generation(worker_conn, document_id, generation_id, parsed, chunks, check_lease=lease_check)
    )
    wait_until_blocked(operator, worker_pid, by=barrier_pid)

    deleter = new_conn(schema.url)
    deleter_pid = backend_pid(deleter)
    deleting = Background(lambda: delete(schema, deleter, document_id))
    state = done_or_blocked(operator, deleting, deleter_pid, by=worker_pid)
    if state == "done":
        deleted = deleting.join()
        assert not searchable(operator, document_id, WORD)
    barrier.rollback()  # release the COPY

    if not schema.hardened:
        assert state == "done"  # the operator's statements never touch the COPY's uncommitted rows
        copying.join()  # accepted: the job still holds its lease
        assert worker.commit(generation_id).ok
        assert worker.complete().ok
        back = document(operator, document_id)
        assert (back["status"], back["index_generation_id"], back["chunk_count"]) == ("indexed", generation_id, 3)
        cleanup(operator)
        assert document_rows(operator, document_id)["document_chunks"] == 3
        return

    if state == "done" and pause != "after_last_copy":
        # The delete committed first: the next COPY's fence refuses, the whole write rolls back.
        with pytest.raises(psycopg.DatabaseError) as refused:
            copying.join()
        assert refused.value.sqlstate == FENCE_REFUSED, refused.value
        assert document_rows(operator, document_id)["document_pages"] == 0
    else:
        # Every fence had passed (or the delete waited): the rows landed, under a job now cancelled.
        copying.join()
        if state == "blocked":
            deleted = deleting.join()
        assert document_rows(operator, document_id)["document_chunks"] == 3
    assert (deleted.cancelled_job_id, deleted.in_flight, deleted.purged) == (job_id, True, False), deleted
    assert_cancelled(operator, job_id, "document deleted")
    assert_refused_everywhere(worker, generation_id)
    assert_deleted(operator, document_id)
    assert not searchable(operator, document_id, WORD)
    cleanup(operator)
    assert document_rows(operator, document_id) == NOTHING_LEFT
    assert counters(operator, batch_id)["cancelled_files"] == 1
    assert failing_index_checks(schema.url, operator) == []


# -- 4. cancel vs a claim in flight ------------------------------------------------------


def test_cancel_waits_for_a_claim_in_flight_then_cancels_the_claimed_job(lifecycle_schema, new_conn):
    """The claim locked the first job of the batch in a transaction still open; the cancel
    blocks on it; then the claim commits. Head: the cancel cancels the now-processing job
    too (in_flight 1), the claimer's every later call is refused, the batch ends cancelled
    with exact counters. Before: the cancel skips the job the claim took; the claimer builds
    and completes it (a job of a cancelled batch gets indexed) and the batch's counters
    drift from its jobs."""
    schema = lifecycle_schema
    operator = new_conn(schema.url)
    batch_id = seed_batch(operator)
    first_document, first_job = seed_job(operator, batch_id)
    second_document, second_job = seed_job(operator, batch_id)

    claimer = new_conn(schema.url, autocommit=False)
    claimer_pid = backend_pid(claimer)
    [claimed] = AnySchemaRpc(claimer).claim("W")  # transaction left open: the job row stays locked
    assert claimed.job_id == first_job

    canceller = new_conn(schema.url)
    canceller_pid = backend_pid(canceller)
    cancelling = Background(lambda: cancel(schema, canceller, batch_id))
    wait_until_blocked(operator, canceller_pid, by=claimer_pid)
    claimer.commit()
    cancelled = cancelling.join()

    worker = Worker(AnySchemaRpc(new_conn(schema.url)), claimed)
    if not schema.hardened:
        assert job(operator, first_job)["status"] == "processing"  # the cancel skipped it
        generation_id = worker.begin().generation_id
        write_artifacts(operator, first_document, generation_id, word=WORD)
        assert worker.commit(generation_id).ok
        assert worker.complete().ok
        assert searchable(operator, first_document, WORD)
        assert AnySchemaRpc(operator).queue_health().batch_counter_drift == 1
        return

    assert cancelled.ok, cancelled
    assert (cancelled.cancelled, cancelled.in_flight) == (2, 1), cancelled
    assert sorted(cancelled.job_ids) == sorted([first_job, second_job])
    assert_cancelled(operator, first_job, "import batch cancelled")
    assert_cancelled(operator, second_job, "import batch cancelled")
    assert_refused_everywhere(worker, None)
    assert {document(operator, d)["status"] for d in (first_document, second_document)} == {"cancelled"}
    expected = {
        "status": "cancelled",
        "total_files": 2,
        "open_files": 0,
        "completed_files": 0,
        "failed_files": 0,
        "cancelled_files": 2,
    }
    assert counters(operator, batch_id) == expected
    assert cancelled.batch.model_dump(include={"status", "total", "completed", "failed", "cancelled", "open"}) == {
        "status": "cancelled",
        "total": 2,
        "completed": 0,
        "failed": 0,
        "cancelled": 2,
        "open": 0,
    }
    assert batch(operator, batch_id)["cancelled_at"] is not None
    again = AnySchemaRpc(operator).cancel_batch(batch_id)
    # From …_one_lock_order.sql a cancel with nothing open still answers ok (and marks the batch).
    assert (again.ok, again.nothing_open) == (True, True), again
    assert counters(operator, batch_id) == expected
    cleanup(operator)
    assert failing_index_checks(schema.url, operator) == []


def test_cancel_refuses_a_worker_between_begin_and_commit(lifecycle_schema, new_conn):
    """The batch is cancelled while a worker has begun its generation and written rows.
    Head: the job is cancelled (in_flight 1), the generation abandoned, the worker's late
    row and every later call refused; the cleanup removes the generation's rows but keeps
    the (not deleted) document's bytes. Before: the cancel does not touch the processing
    job: the worker commits and completes, a job of the cancelled batch is indexed."""
    schema = lifecycle_schema
    operator, batch_id, document_id, job_id, worker_conn, worker, generation_id = begun_build(schema, new_conn)
    write_artifacts(worker_conn, document_id, generation_id, word=WORD)

    cancelled = cancel(schema, operator, batch_id)

    if not schema.hardened:
        insert_late_chunk(worker_conn, document_id, generation_id)
        assert worker.commit(generation_id).ok and worker.complete().ok
        assert searchable(operator, document_id, WORD)
        assert job(operator, job_id)["status"] == "completed"
        return

    assert cancelled.ok and (cancelled.cancelled, cancelled.in_flight) == (1, 1), cancelled
    assert_cancelled(operator, job_id, "import batch cancelled")
    assert conn_scalar(operator, "select status from index_generations where id = %s", generation_id) == "abandoned"
    assert_fence_refuses(insert_late_chunk, worker_conn, document_id, generation_id)
    assert_refused_everywhere(worker, generation_id)
    assert document(operator, document_id)["status"] == "cancelled"
    assert not searchable(operator, document_id, WORD)
    cleanup(operator)
    assert document_rows(operator, document_id) == {**NOTHING_LEFT, "document_sources": 1}
    assert counters(operator, batch_id) == {
        "status": "cancelled",
        "total_files": 1,
        "open_files": 0,
        "completed_files": 0,
        "failed_files": 0,
        "cancelled_files": 1,
    }
    assert failing_index_checks(schema.url, operator) == []


def test_cancel_waits_for_a_completion_in_flight_and_leaves_it_completed(lifecycle_schema, new_conn):
    """A worker's commit_and_complete has run in a transaction still open (the job row is
    locked) when the batch is cancelled; then it commits. Head: the cancel waited for it and
    cancels only the job still open: the indexed document stays indexed and searchable, the
    counters are exact (completed 1, cancelled 1). Before: the hand-made cancel fails the
    pending job without moving a counter: the batch's counters drift from its jobs."""
    schema = lifecycle_schema
    operator = new_conn(schema.url)
    batch_id = seed_batch(operator)
    first_document, first_job = seed_job(operator, batch_id)
    _, second_job = seed_job(operator, batch_id)
    worker_conn = new_conn(schema.url, autocommit=False)
    worker_conn.execute("set lock_timeout = '15s'")
    worker_conn.commit()
    worker = Worker.claiming(worker_conn)
    worker_conn.commit()
    generation_id = worker.begin().generation_id
    write_artifacts(worker_conn, first_document, generation_id, word=WORD)
    worker_conn.commit()
    worker_pid = backend_pid(worker_conn)
    done = worker.rpc.commit_and_complete(
        *worker.ids, generation_id, worker_id="W", lease_token=worker.claim.lease_token
    )  # transaction left open
    assert done.ok, done

    canceller = new_conn(schema.url)
    canceller_pid = backend_pid(canceller)
    cancelling = Background(lambda: cancel(schema, canceller, batch_id))
    state = done_or_blocked(operator, cancelling, canceller_pid, by=worker_pid)
    worker_conn.commit()
    cancelled = cancelling.join()
    assert job(operator, first_job)["status"] == "completed"
    assert searchable(operator, first_document, WORD)

    if not schema.hardened:
        assert state == "done"  # its UPDATE never matched the processing job
        assert job(operator, second_job)["status"] == "failed"
        assert counters(operator, batch_id) == {
            "status": "processing",
            "total_files": 2,
            "open_files": 1,
            "completed_files": 1,
            "failed_files": 0,
        }
        assert AnySchemaRpc(operator).queue_health().batch_counter_drift == 1
        return

    assert state == "blocked"  # it locks the open jobs: it waited for the completion
    assert cancelled.ok and (cancelled.cancelled, cancelled.in_flight) == (1, 0), cancelled
    assert cancelled.job_ids == [second_job]
    assert_cancelled(operator, second_job, "import batch cancelled")
    assert document(operator, first_document)["status"] == "indexed"
    assert counters(operator, batch_id) == {
        "status": "cancelled",
        "total_files": 2,
        "open_files": 0,
        "completed_files": 1,
        "failed_files": 0,
        "cancelled_files": 1,
    }
    assert failing_index_checks(schema.url, operator) == []


def test_a_claim_skips_the_jobs_a_cancel_in_flight_holds(lifecycle_schema, new_conn):
    """The cancel locked the batch's jobs in a transaction still open; a claim runs: it
    must not wait and must not get them (it takes an unrelated job instead). After the
    cancel commits no claim gets them. Head: the jobs are cancelled, the batch ends
    cancelled with exact counters, a retry of a cancelled job is refused. Before: the claim
    skips them too, but the hand-made cancel moved no counter (the batch stays
    `processing` with 2 open) and the operator's retry puts a "cancelled" job back in the
    queue."""
    schema = lifecycle_schema
    operator = new_conn(schema.url)
    batch_id = seed_batch(operator)
    first_document, first_job = seed_job(operator, batch_id)
    _, second_job = seed_job(operator, batch_id)
    _, unrelated_job = seed_job(operator)

    canceller = new_conn(schema.url, autocommit=False)
    cancelled = cancel(schema, canceller, batch_id)  # transaction left open

    claimer = new_conn(schema.url)
    claimer.execute("set lock_timeout = '5s'")  # waiting would be a failure: fail fast
    claims = AnySchemaRpc(claimer).claim("W", limit=3)
    assert [c.job_id for c in claims] == [unrelated_job]
    canceller.commit()
    assert AnySchemaRpc(claimer).claim("W", limit=3) == []

    if not schema.hardened:
        assert counters(operator, batch_id) == {
            "status": "processing",
            "total_files": 2,
            "open_files": 2,
            "completed_files": 0,
            "failed_files": 0,
        }
        assert AnySchemaRpc(operator).queue_health().batch_counter_drift == 1
        assert AnySchemaRpc(operator).retry(first_job).ok
        [reclaimed] = AnySchemaRpc(claimer).claim("W")
        assert reclaimed.job_id == first_job
        return

    assert cancelled.ok and (cancelled.cancelled, cancelled.in_flight) == (2, 0), cancelled
    assert_cancelled(operator, first_job, "import batch cancelled")
    assert_cancelled(operator, second_job, "import batch cancelled")
    assert document(operator, first_document)["status"] == "cancelled"
    assert counters(operator, batch_id) == {
        "status": "cancelled",
        "total_files": 2,
        "open_files": 0,
        "completed_files": 0,
        "failed_files": 0,
        "cancelled_files": 2,
    }
    refused = AnySchemaRpc(operator).retry(first_job)
    assert (refused.ok, refused.reason) == (False, "cancelled"), refused
    assert AnySchemaRpc(claimer).claim("W") == []
    assert job(operator, unrelated_job)["status"] == "processing"
    assert failing_index_checks(schema.url, operator) == []


# -- 5. delete vs an enqueue in flight ---------------------------------------------------


def open_jobs(conn, document_id: UUID) -> list[dict]:
    return conn.execute(
        "select id, status from ingestion_jobs where document_id = %s and status in ('pending', 'processing')",
        (document_id,),
    ).fetchall()


def assert_no_open_job_of_a_deleted_document(conn, document_id: UUID) -> None:
    """No serial order of an enqueue and a delete leaves one: an enqueue after the delete
    is refused (document_not_found), one before it is cancelled by it."""
    assert open_jobs(conn, document_id) == []
    assert_deleted(conn, document_id)
    assert AnySchemaRpc(conn).claim("late-worker") == []


def test_delete_while_an_enqueue_of_the_document_is_in_flight(lifecycle_schema, new_conn):
    """`ingest enqueue --reindex` of an indexed document has enqueued its job in a
    transaction not yet committed (enqueue.py runs the look-up and the enqueue in one) when
    the delete runs: the delete waits for it (the enqueue updated the document row), then
    commits. Before: the reindex job stays pending for a deleted document, and is claimed.
    Head (the delete cancels the document's open job): no open job remains."""
    schema = lifecycle_schema
    operator = new_conn(schema.url)
    seed_job(operator)
    document_id, _ = index_document(AnySchemaRpc(operator), operator, word=WORD)

    enqueuer = new_conn(schema.url, autocommit=False)
    enqueuer_pid = backend_pid(enqueuer)
    queued = AnySchemaRpc(enqueuer).enqueue(document_id, kind="reindex")  # transaction left open
    assert queued.ok, queued
    deleter = new_conn(schema.url)
    deleter_pid = backend_pid(deleter)
    deleting = Background(lambda: delete(schema, deleter, document_id))
    wait_until_blocked(operator, deleter_pid, by=enqueuer_pid)
    enqueuer.commit()
    deleting.join()
    assert not searchable(operator, document_id, WORD)

    if not schema.hardened:
        assert [row["id"] for row in open_jobs(operator, document_id)] == [queued.job_id]
        [claimed] = AnySchemaRpc(operator).claim("late-worker")
        assert claimed.job_id == queued.job_id
        return

    assert_no_open_job_of_a_deleted_document(operator, document_id)


def test_an_enqueue_while_a_delete_of_the_document_is_in_flight(lifecycle_schema, new_conn):
    """The delete has run in a transaction not yet committed when an enqueue of the same
    document runs: the enqueue waits for it, then goes on. Before: the enqueue is accepted,
    its job pending for a deleted document. Head: the enqueue is refused
    (document_not_found) or its job cancelled: no open job of the deleted document."""
    schema = lifecycle_schema
    operator = new_conn(schema.url)
    seed_job(operator)
    document_id, _ = index_document(AnySchemaRpc(operator), operator, word=WORD)

    deleter = new_conn(schema.url, autocommit=False)
    deleter_pid = backend_pid(deleter)
    delete(schema, deleter, document_id)  # transaction left open
    enqueuer = new_conn(schema.url)
    enqueuer_pid = backend_pid(enqueuer)
    enqueuing = Background(lambda: AnySchemaRpc(enqueuer).enqueue(document_id, kind="reindex"))
    wait_until_blocked(operator, enqueuer_pid, by=deleter_pid)
    deleter.commit()
    queued = enqueuing.join()

    if not schema.hardened:
        assert queued.ok
        assert [row["id"] for row in open_jobs(operator, document_id)] == [queued.job_id]
        assert document(operator, document_id)["status"] == "queued"  # a deleted document, queued again
        return

    assert not queued.ok or job(operator, queued.job_id)["status"] == "cancelled", queued
    assert_no_open_job_of_a_deleted_document(operator, document_id)
