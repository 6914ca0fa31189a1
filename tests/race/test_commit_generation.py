"""Commit counts come from the rows; metadata merges; readers see committed rows only."""

from psycopg.types.json import Jsonb

from ingestion_pipeline.db.rpc import IngestionRpc
from tests.helpers import document, index_document, seed_job, start_reindex_build, write_artifacts


def visible_chunks(conn, document_id):
    rows = conn.execute(
        "select index_generation_id from committed_document_chunks where document_id = %s", (document_id,)
    ).fetchall()
    return [r["index_generation_id"] for r in rows]


def test_commit_counts_the_rows_of_the_generation(conn):
    rpc = IngestionRpc(conn)
    document_id, _ = seed_job(conn)
    [claimed] = rpc.claim("worker-1")
    generation_id = rpc.begin_generation(claimed.job_id, document_id, "worker-1").generation_id
    write_artifacts(conn, document_id, generation_id, pages=1, sections=4, chunks=7)

    # The client claims other counts; the server ignores them.
    result = rpc.commit_generation(
        claimed.job_id, document_id, generation_id, "worker-1", {"chunk_count": 99, "page_count": 99}
    )
    assert (result.page_count, result.section_count, result.chunk_count) == (1, 4, 7)
    stored = document(conn, document_id)
    assert (stored["page_count"], stored["section_count"], stored["chunk_count"]) == (1, 4, 7)
    generation = conn.execute("select * from index_generations where id = %s", (generation_id,)).fetchone()
    assert (generation["status"], generation["chunk_count"]) == ("committed", 7)


def test_commit_merges_metadata(conn):
    rpc = IngestionRpc(conn)
    document_id, _ = seed_job(conn)
    conn.execute("update documents set metadata = %s where id = %s", (Jsonb({"owner": "ops"}), document_id))
    [claimed] = rpc.claim("worker-1")
    generation_id = rpc.begin_generation(claimed.job_id, document_id, "worker-1").generation_id
    rpc.commit_generation(
        claimed.job_id, document_id, generation_id, "worker-1", {"title": "Annual report", "language": "en"}
    )
    stored = document(conn, document_id)
    assert stored["metadata"] == {"owner": "ops", "title": "Annual report", "language": "en"}
    assert stored["title"] == "Annual report"


def test_readers_never_see_a_building_generation(conn):
    rpc = IngestionRpc(conn)
    seed_job(conn)
    document_id, committed = index_document(rpc, conn, chunks=3)
    reindex, building = start_reindex_build(rpc, conn, document_id, "worker-2", chunks=5)

    assert visible_chunks(conn, document_id) == [committed] * 3
    rpc.commit_generation(reindex.job_id, document_id, building, "worker-2")
    assert visible_chunks(conn, document_id) == [building] * 5
    old = conn.execute("select status from index_generations where id = %s", (committed,)).fetchone()
    assert old["status"] == "superseded"


def test_a_generation_commits_once(conn):
    rpc = IngestionRpc(conn)
    document_id, _ = seed_job(conn)
    [claimed] = rpc.claim("worker-1")
    generation_id = rpc.begin_generation(claimed.job_id, document_id, "worker-1").generation_id
    assert rpc.commit_generation(claimed.job_id, document_id, generation_id, "worker-1").ok
    again = rpc.commit_generation(claimed.job_id, document_id, generation_id, "worker-1")
    assert (again.ok, again.reason) == (False, "generation_not_building")
