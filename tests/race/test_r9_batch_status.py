"""R9: the last two jobs of a batch finish in overlapping transactions."""

from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import Background, backend_pid, batch, seed_batch, seed_job, wait_until_blocked


def test_overlapping_last_completions_leave_the_batch_terminal(schema, new_conn):
    setup = new_conn(schema.url)
    batch_id = seed_batch(setup)
    seed_job(setup, batch_id)
    seed_job(setup, batch_id)
    setup_rpc = AnySchemaRpc(setup)
    [first] = setup_rpc.claim("worker-1")
    [second] = setup_rpc.claim("worker-2")

    # Transaction 1 completes the first job and stays open.
    tx1 = new_conn(schema.url, autocommit=False)
    tx1.execute("select 1")
    assert AnySchemaRpc(tx1).complete(first.job_id, first.document_id, worker_id="worker-1", batch_id=batch_id).ok

    # Transaction 2 completes the second job; it must block on the batch row.
    tx2 = new_conn(schema.url)
    tx2_pid = backend_pid(tx2)
    second_done = Background(
        lambda: AnySchemaRpc(tx2).complete(second.job_id, second.document_id, worker_id="worker-2", batch_id=batch_id)
    )
    wait_until_blocked(setup, tx2_pid, by=backend_pid(tx1))
    tx1.commit()
    assert second_done.join().ok

    final = batch(setup, batch_id)
    if schema.hardened:
        assert final["status"] == "completed"
        assert (final["total_files"], final["completed_files"], final["failed_files"]) == (2, 2, 0)
        assert final["completed_at"] is not None
    else:
        # The bug: the second transaction counted from a snapshot without the first.
        assert final["status"] == "processing"
        assert final["completed_files"] == 1


def test_several_batches_are_locked_in_id_order_whatever_the_input_order(db_url, new_conn):
    """Two refreshes with overlapping batch sets never take the locks in opposite orders."""
    setup = new_conn(db_url)
    low, high = sorted([seed_batch(setup), seed_batch(setup)])
    holder = new_conn(db_url, autocommit=False)
    holder.execute("select 1 from import_batches where id = %s for update", (low,))

    refresher = new_conn(db_url)
    refresher_pid = backend_pid(refresher)
    refresh = Background(
        lambda: refresher.execute("select refresh_import_batches(array[%s, %s]::uuid[])", (high, low)).fetchone()
    )
    wait_until_blocked(setup, refresher_pid, by=backend_pid(holder))
    # Blocked on the lower id, it has not touched the higher one yet.
    free = new_conn(db_url, autocommit=False)
    free.execute("select 1 from import_batches where id = %s for update nowait", (high,))
    free.rollback()
    holder.rollback()
    refresh.join()
