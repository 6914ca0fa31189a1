"""Claim: SKIP LOCKED between concurrent workers, next_run_at, per-document exclusivity,
max_attempts."""

from ingestion_pipeline.db.rpc import IngestionRpc
from tests.helpers import job, make_lease_stale, seed_job


def test_concurrent_claims_never_share_a_job(db_url, new_conn):
    setup = new_conn(db_url)
    jobs = {seed_job(setup)[1] for _ in range(3)}

    first_tx = new_conn(db_url, autocommit=False)
    first = IngestionRpc(first_tx).claim("worker-1", limit=2)  # locks held: tx open
    second = IngestionRpc(new_conn(db_url)).claim("worker-2", limit=2)
    first_tx.commit()

    first_ids = {j.job_id for j in first}
    second_ids = {j.job_id for j in second}
    assert len(first_ids) == 2 and len(second_ids) == 1
    assert first_ids.isdisjoint(second_ids)
    assert first_ids | second_ids == jobs


def test_claim_waits_for_next_run_at(conn):
    rpc = IngestionRpc(conn)
    _, job_id = seed_job(conn)
    conn.execute("update ingestion_jobs set next_run_at = now() + interval '1 hour' where id = %s", (job_id,))
    assert rpc.claim("worker-1") == []
    conn.execute("update ingestion_jobs set next_run_at = now() - interval '1 second' where id = %s", (job_id,))
    assert [j.job_id for j in rpc.claim("worker-1")] == [job_id]


def test_claim_skips_a_job_whose_document_is_locked(db_url, new_conn):
    conn = new_conn(db_url)
    locked_document, _ = seed_job(conn)
    _, free_job = seed_job(conn)
    holder = new_conn(db_url, autocommit=False)
    holder.execute("select 1 from documents where id = %s for update", (locked_document,))

    claimed = IngestionRpc(conn).claim("worker-1", limit=5)
    holder.rollback()
    assert [j.job_id for j in claimed] == [free_job]


def test_claim_honours_max_attempts(conn):
    rpc = IngestionRpc(conn)
    _, job_id = seed_job(conn, max_attempts=1)
    [claimed] = rpc.claim("worker-1")
    make_lease_stale(conn, job_id)
    assert rpc.claim("worker-2") == []  # stale, but no attempts left
    assert job(conn, job_id)["locked_by"] == "worker-1"
    assert claimed.attempt_count == 1


def test_stale_lease_with_attempts_left_is_reclaimed(conn):
    rpc = IngestionRpc(conn)
    _, job_id = seed_job(conn, max_attempts=3)
    rpc.claim("worker-1")
    make_lease_stale(conn, job_id)
    [reclaimed] = rpc.claim("worker-2")
    assert (reclaimed.job_id, reclaimed.locked_by, reclaimed.attempt_count) == (job_id, "worker-2", 2)


def test_a_worker_never_reclaims_its_own_stale_job(conn):
    """Two runs under one worker id would both pass the fence."""
    rpc = IngestionRpc(conn)
    _, job_id = seed_job(conn)
    rpc.claim("worker-1")
    make_lease_stale(conn, job_id)
    assert rpc.claim("worker-1") == []
    assert [j.job_id for j in rpc.claim("worker-2")] == [job_id]
