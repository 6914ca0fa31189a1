"""The batch-counter migration fills the counters (and the status) of existing batches from
their jobs, so the first transition after it moves exact numbers, and a batch whose stored
status was already wrong (an old R9 victim) comes out right."""

from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect
from tests.any_schema_rpc import AnySchemaRpc
from tests.conftest import BULK_ACK_NAME, _fresh_database
from tests.helpers import batch, seed_batch, seed_job


def counters(conn, batch_id) -> tuple:
    row = batch(conn, batch_id)
    return row["status"], row["total_files"], row["open_files"], row["completed_files"], row["failed_files"]


def test_existing_batches_get_exact_counters(pg_server, template_before):
    for url in _fresh_database(pg_server, template_before(BULK_ACK_NAME)):
        with connect(url) as conn:
            rpc = AnySchemaRpc(conn)
            mixed, wrong, empty = seed_batch(conn, "mixed"), seed_batch(conn, "wrong status"), seed_batch(conn, "empty")
            for _ in range(4):
                seed_job(conn, mixed, max_attempts=1)
            done, failed, running = rpc.claim("worker-1", limit=3)
            assert rpc.complete(done.job_id, done.document_id, worker_id="worker-1", lease_token=done.lease_token).ok
            assert rpc.fail_or_retry(
                failed.job_id, failed.document_id, worker_id="worker-1", lease_token=failed.lease_token
            ).ok
            seed_job(conn, wrong)
            conn.execute("update import_batches set status = 'completed' where id = %s", (wrong,))  # an old R9 victim

        migrator.migrate(url)

        with connect(url) as conn:
            rpc = AnySchemaRpc(conn)
            # 4 jobs: one pending, one processing, one completed, one failed
            assert counters(conn, mixed) == ("processing", 4, 2, 1, 1)
            assert counters(conn, empty) == ("pending", 0, 0, 0, 0)
            assert counters(conn, wrong) == ("processing", 1, 1, 0, 0)
            assert rpc.queue_health().batch_counter_drift == 0

            assert rpc.complete(
                running.job_id, running.document_id, worker_id="worker-1", lease_token=running.lease_token
            ).ok
            [last] = rpc.claim("worker-1")
            assert rpc.complete(last.job_id, last.document_id, worker_id="worker-1", lease_token=last.lease_token).ok
            assert counters(conn, mixed) == ("completed_with_errors", 4, 0, 3, 1)
            assert rpc.queue_health().batch_counter_drift == 0
