"""R15: a failed (or retried) reindex never demotes an indexed document."""

import pytest

from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import document, index_document, seed_job


def committed_chunks(conn, document_id):
    return conn.execute(
        "select count(*) as n from committed_document_chunks where document_id = %s", (document_id,)
    ).fetchone()["n"]


@pytest.mark.parametrize("retry", [False, True], ids=["fail", "retry"])
def test_failed_reindex_keeps_the_live_index(schema, new_conn, retry):
    conn = new_conn(schema.url)
    rpc = AnySchemaRpc(conn)
    seed_job(conn)
    document_id, generation_id = index_document(rpc, conn, chunks=3)
    assert rpc.enqueue(document_id, kind="reindex").ok
    [reindex] = rpc.claim("worker-r")

    outcome = rpc.fail_or_retry(
        reindex.job_id, document_id, worker_id="worker-r", retry=retry, error_message="parser crashed"
    )
    assert outcome.ok

    after = document(conn, document_id)
    if schema.hardened:
        assert after["status"] == "indexed"
        assert after["index_generation_id"] == generation_id
        assert committed_chunks(conn, document_id) == 3
    else:
        assert after["status"] == ("queued" if retry else "failed")
        assert after["index_generation_id"] is None
        assert committed_chunks(conn, document_id) == 0
