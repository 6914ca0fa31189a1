"""The janitor's passes cost what they find (issue 29, item 6; migrations …_one_lock_order.sql
and …_janitor_indexes.sql).

Before them, the cleanup's candidate select drove off `documents` with an OR and read every
document even with nothing to clean, and drift detection grouped every job of every batch.
At head the candidates come from partial indexes (uncommitted generations; deleted
documents whose bytes are still stored) and drift looks at open batches and those finished
within the last hour. Observed through the rows each pass reads (the transaction's table
and index statistics), on the schema just before the migration and at head.
"""

from __future__ import annotations

from ingestion_pipeline.db.models import CompleteItem
from ingestion_pipeline.db.rpc import IngestionRpc
from tests.helpers import seed_batch, seed_document, seed_job

LIVE_DOCUMENTS = 300
FINISHED_JOBS = 40


def rows_read(tx, table: str) -> int:
    """Rows of `table` read so far in this transaction: sequential scans, heap fetches and
    index entries returned."""
    return tx.execute(
        """select pg_stat_get_xact_tuples_returned(c.oid) + pg_stat_get_xact_tuples_fetched(c.oid)
                  + coalesce((select sum(pg_stat_get_xact_tuples_returned(i.indexrelid))
                                from pg_index i where i.indrelid = c.oid), 0) as n
             from pg_class c where c.oid = %s::regclass""",
        (table,),
    ).fetchone()["n"]


def read_by(tx, table: str, statement: str) -> int:
    before = rows_read(tx, table)
    tx.execute(statement)
    return rows_read(tx, table) - before


def test_a_cleanup_pass_with_nothing_to_clean_reads_no_document(lock_order_schema, new_conn):
    conn = new_conn(lock_order_schema.url)
    for _ in range(LIVE_DOCUMENTS):
        seed_document(conn)
    tx = new_conn(lock_order_schema.url, autocommit=False)
    for dry_run in ("true", "false"):
        read = read_by(
            tx,
            "documents",
            f"select cleanup_abandoned_document_index_generations(p_limit => 100, p_dry_run => {dry_run}) as r",
        )
        if lock_order_schema.hardened:
            assert read == 0, f"dry_run={dry_run}"
        else:  # the defect: every document is read to find nothing
            assert read >= LIVE_DOCUMENTS, f"dry_run={dry_run}"
    tx.rollback()


def test_a_drift_pass_reads_no_job_of_batches_finished_long_ago(lock_order_schema, new_conn):
    conn = new_conn(lock_order_schema.url)
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    for _ in range(FINISHED_JOBS):
        seed_job(conn, batch_id)
    claims = rpc.claim("worker-1", limit=FINISHED_JOBS)
    assert all(
        a.ok
        for a in rpc.complete_many("worker-1", [CompleteItem(c.job_id, c.document_id, c.lease_token) for c in claims])
    )
    conn.execute("update import_batches set completed_at = now() - interval '2 days' where id = %s", (batch_id,))

    tx = new_conn(lock_order_schema.url, autocommit=False)
    read = read_by(tx, "ingestion_jobs", "select refresh_drifted_import_batches(100) as r")
    if lock_order_schema.hardened:
        assert read == 0
    else:  # the defect: every job of every batch is grouped
        assert read >= FINISHED_JOBS
    tx.rollback()
