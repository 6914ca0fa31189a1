"""R1 (leases renewed by heartbeat) and R2 (a reclaimed worker changes nothing)."""

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


def test_heartbeat_keeps_a_live_lease_from_being_reclaimed(schema, new_conn):
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    seed_job(conn, seed_batch(conn))
    [claimed] = rpc.claim("worker-a")
    make_lease_stale(conn, claimed.job_id, seconds_ago=200)  # a long job, worker alive

    heartbeat = rpc.heartbeat(claimed.job_id, "worker-a", progress=40, stage="parse")
    taken_by_b = rpc.claim("worker-b", stale_after_seconds=100)

    if schema.hardened:
        assert heartbeat.ok and heartbeat.fenced
        assert taken_by_b == []
        assert job(conn, claimed.job_id)["locked_by"] == "worker-a"
        assert job(conn, claimed.job_id)["progress"] == 40
    else:
        # R1: no heartbeat exists, so the live worker's job is reclaimed.
        assert not heartbeat.fenced
        assert [j.job_id for j in taken_by_b] == [claimed.job_id]
        assert job(conn, claimed.job_id)["locked_by"] == "worker-b"


def test_zombie_worker_changes_nothing_after_reclaim(schema, new_conn):
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    batch_id = seed_batch(conn)
    seed_job(conn, batch_id)
    seed_job(conn, batch_id)  # a sibling in the same batch
    [a] = rpc.claim("worker-a")
    a_generation = rpc.begin_generation(a.job_id, a.document_id, "worker-a").generation_id
    write_artifacts(conn, a.document_id, a_generation)
    make_lease_stale(conn, a.job_id)
    [b] = rpc.claim("worker-b")
    assert b.job_id == a.job_id  # B reclaimed A's stale job
    before = snapshot(conn)

    if not schema.hardened:
        # R2: A's late completion is written by job id alone over B's live lease.
        late = rpc.complete(a.job_id, a.document_id, worker_id="worker-a", batch_id=batch_id)
        assert late.ok and not late.fenced
        assert snapshot(conn) != before
        assert job(conn, a.job_id)["status"] == "completed"
        assert job(conn, a.job_id)["locked_by"] is None  # B's lease is gone
        return

    outcomes = [
        rpc.complete(a.job_id, a.document_id, worker_id="worker-a", batch_id=batch_id),
        rpc.fail_or_retry(a.job_id, a.document_id, worker_id="worker-a", retry=True, error_message="late"),
        rpc.fail_or_retry(a.job_id, a.document_id, worker_id="worker-a", retry=False, error_message="late"),
        rpc.heartbeat(a.job_id, "worker-a", progress=90),
        rpc.commit_generation(a.job_id, a.document_id, a_generation, "worker-a", {"title": "zombie"}),
        rpc.begin_generation(a.job_id, a.document_id, "worker-a"),
    ]
    assert [o.reason for o in outcomes] == ["lease_lost"] * len(outcomes)
    assert all(o.lease_lost for o in outcomes)
    assert snapshot(conn) == before  # job, document, sibling, generations, batch untouched

    # B finishes normally.
    b_generation = rpc.begin_generation(b.job_id, b.document_id, "worker-b").generation_id
    write_artifacts(conn, b.document_id, b_generation, chunks=4)
    assert rpc.commit_generation(b.job_id, b.document_id, b_generation, "worker-b").ok
    assert rpc.complete(b.job_id, b.document_id, worker_id="worker-b", batch_id=batch_id).ok
    assert job(conn, b.job_id)["status"] == "completed"
    assert document(conn, b.document_id)["index_generation_id"] == b_generation
    assert document(conn, b.document_id)["chunk_count"] == 4
