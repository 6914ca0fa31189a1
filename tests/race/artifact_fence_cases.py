"""The bodies of the artifact-fence race tests (migration …_lease_tokens.sql), shared by
two test modules, each with a thin `test_…` wrapper per body: tests/race/test_artifact_fence.py
(just before the migration and at head) and tests/race/test_fences_through_pooler.py (at head,
through PgBouncer). Each body takes the fixture's `tests.conftest.Schema` (`url`, where every
connection of the test goes; `hardened`; `direct_url`, the server itself) and `new_conn`."""

from contextlib import contextmanager

import psycopg
import pytest

from ingestion_pipeline.db.models import ClaimedJob
from ingestion_pipeline.processing import Chunk, ParsedDocument
from ingestion_pipeline.worker.artifacts import write_generation
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import (
    document,
    job,
    make_lease_stale,
    seed_batch,
    seed_job,
    snapshot,
    write_artifacts,
)

FENCE_REFUSED = "IF001"
LATE_ORDINAL = 99


def insert_chunk(conn, document_id, generation_id, ordinal: int = LATE_ORDINAL) -> None:
    conn.execute(
        "insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count) "
        "values (%s, %s, %s, 'late chunk about omega', 4)",
        (document_id, generation_id, ordinal),
    )


def copy_chunk(conn, document_id, generation_id, ordinal: int = LATE_ORDINAL) -> None:
    """The worker's own path: COPY, in one transaction (ingestion_pipeline/worker/artifacts.py),
    its client-side lease check taken as passed (the write races a reclaim or a commit)."""
    parsed = ParsedDocument(title=None, mime_type="text/plain", pages=[], sections=[])
    chunk = Chunk(
        ordinal=ordinal, section_ordinal=None, page_ordinal=None, text="late chunk about omega", token_count=4
    )
    write_generation(conn, document_id, generation_id, parsed, [chunk], check_lease=lambda: None)


@contextmanager
def as_worker_role(conn):
    """What the worker's database role may do (it has INSERT on the artifact tables). The
    role is the transaction's (`set local`): behind a transaction-mode pooler a session's
    `set role` would stay on a server connection other clients get next."""
    with conn.transaction():
        conn.execute("set local role ingestion_worker")
        yield


def insert_chunk_as_worker_role(conn, document_id, generation_id, ordinal: int = LATE_ORDINAL) -> None:
    with as_worker_role(conn):
        insert_chunk(conn, document_id, generation_id, ordinal)


WRITERS = {"insert": insert_chunk, "copy": copy_chunk, "worker_role": insert_chunk_as_worker_role}


def assert_refused(write, *args) -> None:
    with pytest.raises(psycopg.DatabaseError) as refused:
        write(*args)
    assert refused.value.sqlstate == FENCE_REFUSED, refused.value


def committed_chunks(conn, document_id) -> list[int]:
    return [
        r["ordinal"]
        for r in conn.execute(
            "select ordinal from committed_document_chunks where document_id = %s order by ordinal", (document_id,)
        ).fetchall()
    ]


def claim_one(rpc: AnySchemaRpc, worker_id: str) -> ClaimedJob:
    [claimed] = rpc.claim(worker_id)
    return claimed


def begin(rpc: AnySchemaRpc, claim: ClaimedJob):
    return rpc.begin_generation(
        claim.job_id, claim.document_id, claim.locked_by, lease_token=claim.lease_token
    ).generation_id


def build_and_commit(rpc: AnySchemaRpc, conn, claim: ClaimedJob, chunks: int = 3):
    generation_id = begin(rpc, claim)
    write_artifacts(conn, claim.document_id, generation_id, chunks=chunks)
    assert rpc.commit_and_complete(
        claim.job_id,
        claim.document_id,
        generation_id,
        worker_id=claim.locked_by,
        lease_token=claim.lease_token,
        batch_id=claim.batch_id,
    ).ok
    return generation_id


def a_committed_generation_refuses_new_rows(schema, new_conn, writer):
    """After the job committed and completed, a chunk is added to the live generation
    (plain INSERT, the worker's COPY, or as ingestion_worker). Before: readers see it and
    the stored counts no longer match the rows. After: IF001, nothing changes."""
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    seed_job(conn, seed_batch(conn))
    claim = claim_one(rpc, "W")
    generation_id = build_and_commit(rpc, conn, claim, chunks=3)
    before = snapshot(conn)
    write = WRITERS[writer]

    if not schema.hardened:
        write(conn, claim.document_id, generation_id)
        assert committed_chunks(conn, claim.document_id) == [0, 1, 2, LATE_ORDINAL]
        assert document(conn, claim.document_id)["chunk_count"] == 3
        assert rpc.queue_health().count_mismatches == 1
        return

    assert_refused(write, conn, claim.document_id, generation_id)
    assert snapshot(conn) == before
    assert committed_chunks(conn, claim.document_id) == [0, 1, 2]
    assert rpc.queue_health().count_mismatches == 0


def a_reclaimed_claim_cannot_write_into_its_own_building_generation(schema, new_conn):
    """A began and filled its generation, lost its lease, B reclaimed. Before: A's late
    COPY still lands in A's generation. After: IF001; B's own rows are accepted (also
    from the worker's role) and B commits."""
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    seed_job(conn)
    a = claim_one(rpc, "A")
    a_generation = begin(rpc, a)
    write_artifacts(conn, a.document_id, a_generation, chunks=2)  # while A holds the lease
    make_lease_stale(conn, a.job_id)
    b = claim_one(rpc, "B")
    assert b.job_id == a.job_id

    if not schema.hardened:
        copy_chunk(conn, a.document_id, a_generation)
        assert (
            conn.execute(
                "select count(*) as n from document_chunks where index_generation_id = %s", (a_generation,)
            ).fetchone()["n"]
            == 3
        )
        return

    before = snapshot(conn)
    assert_refused(copy_chunk, conn, a.document_id, a_generation)
    assert_refused(insert_chunk, conn, a.document_id, a_generation)
    assert snapshot(conn) == before

    b_generation = begin(rpc, b)
    write_artifacts(conn, b.document_id, b_generation, chunks=4)
    with as_worker_role(conn):
        copy_chunk(conn, b.document_id, b_generation, ordinal=4)
    assert (
        rpc.commit_and_complete(
            b.job_id, b.document_id, b_generation, worker_id="B", lease_token=b.lease_token
        ).chunk_count
        == 5
    )
    assert document(conn, b.document_id)["index_generation_id"] == b_generation
    assert committed_chunks(conn, b.document_id) == [0, 1, 2, 3, 4]


def superseded_and_abandoned_generations_refuse_rows(schema, new_conn):
    """A generation superseded by a reindex, and one marked abandoned while its job still
    holds the lease. Before: both take new rows. After: both refuse them (IF001)."""
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    seed_job(conn)
    first = claim_one(rpc, "W")
    superseded = build_and_commit(rpc, conn, first)
    assert rpc.enqueue(first.document_id, kind="reindex").ok
    build_and_commit(rpc, conn, claim_one(rpc, "W"))
    assert (
        conn.execute("select status from index_generations where id = %s", (superseded,)).fetchone()["status"]
        == "superseded"
    )

    seed_job(conn)
    holder = claim_one(rpc, "W")
    abandoned = begin(rpc, holder)
    conn.execute("update index_generations set status = 'abandoned' where id = %s", (abandoned,))

    if not schema.hardened:
        insert_chunk(conn, first.document_id, superseded)
        insert_chunk(conn, holder.document_id, abandoned)
        return

    before = snapshot(conn)
    assert_refused(insert_chunk, conn, first.document_id, superseded)
    assert_refused(insert_chunk, conn, holder.document_id, abandoned)
    assert snapshot(conn) == before


def an_open_artifact_write_holds_off_a_takeover_but_not_the_heartbeat(schema, new_conn):
    """The holder wrote its rows in a transaction still open when its lease is made stale.
    At head the fence locked the job row FOR KEY SHARE: a reclaim skips the job and the
    job row cannot be locked for a takeover, while the holder's heartbeat (from its own
    connection) is not blocked. Before: nothing in the write holds the job row (the claim
    skips only because the foreign-key check happens to lock the document row)."""
    setup = new_conn(schema.url)
    rpc = AnySchemaRpc(setup)
    document_id, job_id = seed_job(setup, max_attempts=2)
    holder = claim_one(rpc, "holder")
    generation_id = begin(rpc, holder)

    writer = new_conn(schema.url, autocommit=False)
    write_artifacts(writer, document_id, generation_id)  # transaction left open

    # Every other connection gives up instead of waiting: a block fails the test.
    setup.execute("set lock_timeout = '2s'")
    other = new_conn(schema.url)
    other.execute("set lock_timeout = '2s'")
    heartbeat_conn = new_conn(schema.url)
    heartbeat_conn.execute("set lock_timeout = '2s'")

    make_lease_stale(setup, job_id)
    assert AnySchemaRpc(other).claim("taker") == []
    job_row_free = other.execute(
        "select id from ingestion_jobs where id = %s for update skip locked", (job_id,)
    ).fetchall()
    heartbeat = AnySchemaRpc(heartbeat_conn).heartbeat(job_id, "holder", lease_token=holder.lease_token, progress=60)
    assert heartbeat.ok, heartbeat  # under lock_timeout: it did not wait for the writer

    if not schema.hardened:
        assert [r["id"] for r in job_row_free] == [job_id]  # a job-only takeover would go through
        writer.commit()
        return

    assert job_row_free == []
    writer.commit()
    assert rpc.commit_and_complete(
        job_id, document_id, generation_id, worker_id="holder", lease_token=holder.lease_token
    ).ok
    assert job(setup, job_id)["status"] == "completed"
    assert document(setup, document_id)["chunk_count"] == 3
