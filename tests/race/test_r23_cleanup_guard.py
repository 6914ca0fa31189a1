"""R23: cleanup never deletes a build that was claimed after it chose its candidates."""

from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import (
    Background,
    backend_pid,
    index_document,
    seed_job,
    start_reindex_build,
    wait_until_blocked,
)


def generation_rows(conn, generation_id):
    counts = {}
    for table in ("document_pages", "document_sections", "document_chunks", "index_generations"):
        column = "id" if table == "index_generations" else "index_generation_id"
        counts[table] = conn.execute(
            f"select count(*) as n from {table} where {column} = %s", (generation_id,)
        ).fetchone()["n"]
    return counts


def test_build_claimed_during_cleanup_survives(schema, new_conn):
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    seed_job(conn)
    document_id, _ = index_document(rpc, conn)
    # An abandoned build: a reindex that started a generation, then ended without commit.
    abandoned_job, abandoned = start_reindex_build(rpc, conn, document_id, "worker-old")
    assert rpc.complete(abandoned_job.job_id, document_id, worker_id="worker-old").ok

    # Barrier: hold a lock on one abandoned page so cleanup stops inside its deletes,
    # after it has chosen the document as a candidate.
    barrier = new_conn(schema.url, autocommit=False)
    barrier.execute(
        "select 1 from document_pages where index_generation_id = %s and ordinal = 0 for update", (abandoned,)
    )
    cleaner = new_conn(schema.url)
    cleaner_pid = backend_pid(cleaner)
    cleanup = Background(lambda: AnySchemaRpc(cleaner).cleanup_generations(dry_run=False))
    wait_until_blocked(conn, cleaner_pid, by=backend_pid(barrier))

    # Meanwhile a new reindex is claimed and stages its rows.
    fresh_job, fresh = start_reindex_build(rpc, conn, document_id, "worker-new", pages=2, sections=2, chunks=3)

    barrier.rollback()
    assert cleanup.join().ok

    staged = generation_rows(conn, fresh)
    if schema.hardened:
        assert staged == {"document_pages": 2, "document_sections": 2, "document_chunks": 3, "index_generations": 1}
        committed = rpc.commit_generation(fresh_job.job_id, document_id, fresh, "worker-new")
        assert committed.ok and committed.chunk_count == 3
    else:
        # The bug: the in-flight build's rows were deleted under it.
        assert staged["document_chunks"] == 0
        assert staged["index_generations"] == 0
