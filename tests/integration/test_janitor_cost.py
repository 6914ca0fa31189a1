"""The janitor's passes cost what they find (issue 29, item 6; migrations …_one_lock_order.sql
and …_janitor_indexes.sql; issue 44, defect 5: …_idle_janitor_passes_and_upgrade_window.sql
for the term-count compaction and the kept-bytes cleanup).

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
from ingestion_pipeline.operations.sources import enqueue_content
from tests.helpers import seed_batch, seed_document, seed_job

LIVE_DOCUMENTS = 300
FINISHED_JOBS = 40
TERM_ROWS = 20_000
KEPT_DOCUMENTS = 30


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


def test_a_compaction_with_nothing_to_fold_reads_no_term_row(upgrade_window_schema, new_conn):
    """20,000 term rows, one per lexeme, already compacted: the next pass has nothing to do.
    (The rows are written as the counting trigger writes them, one per lexeme; what a pass
    reads does not depend on which documents they came from.)"""
    conn = new_conn(upgrade_window_schema.url)
    conn.execute(
        "insert into search_term_counts (collection, lexeme, documents, chunks) "
        "select 'default', 'lexeme' || g, 1, 2 from generate_series(1, %s) g",
        (TERM_ROWS,),
    )
    first = IngestionRpc(conn).compact_search_terms(limit=TERM_ROWS)
    # What autovacuum does after a pass: the rows it folded leave the index of unfolded rows.
    # (Without it, the next scan steps over their dead entries once and marks them dead.)
    conn.execute("vacuum analyze search_term_counts")
    tx = new_conn(upgrade_window_schema.url, autocommit=False)
    read = read_by(tx, "search_term_counts", "select compact_search_term_counts(10000) as r")
    answer = tx.execute("select compact_search_term_counts(10000) as r").fetchone()["r"]
    tx.rollback()
    assert answer["removed"] == 0 and answer["written"] == 0
    if upgrade_window_schema.hardened:
        assert (first.removed, first.written) == (TERM_ROWS, TERM_ROWS)  # pre-existing rows fold once
        assert read <= 30, read
    else:  # the defect: every row is grouped to find nothing
        assert read >= TERM_ROWS, read

    # A commit's rows after that: the pass reads those and the rows of their lexemes only.
    conn.execute(
        "insert into search_term_counts (collection, lexeme, documents, chunks) "
        "values ('default', 'lexeme1', 1, 1), ('default', 'lexeme2', -1, -2), ('default', 'fresh', 1, 1)"
    )
    tx = new_conn(upgrade_window_schema.url, autocommit=False)
    read = read_by(tx, "search_term_counts", "select compact_search_term_counts(10000) as r")
    tx.commit()
    rows = {
        r["lexeme"]: (r["documents"], r["chunks"])
        for r in conn.execute(
            "select lexeme, documents, chunks from search_term_counts where lexeme in ('lexeme1', 'lexeme2', 'fresh')"
        )
    }
    assert rows == {"lexeme1": (2, 3), "fresh": (1, 1)}  # lexeme2 reached zero: no row
    if upgrade_window_schema.hardened:
        assert read <= 30, read
    assert conn.execute("select count(*) as n from search_term_counts").fetchone()["n"] == TERM_ROWS


def test_a_kept_bytes_cleanup_with_nothing_owed_reads_no_kept_version(upgrade_window_schema, new_conn):
    """Documents with versions 1 to 4 and their older versions' bytes kept (INGEST_KEEP_VERSIONS
    = 5): nothing is owed under 5; under 3, each owes version 1."""
    conn = new_conn(upgrade_window_schema.url)
    for n in range(KEPT_DOCUMENTS):
        for version in range(1, 5):
            answer = enqueue_content(
                conn,
                f"note {n}, version {version}".encode(),
                source_key=f"app://notes/{n}",
                source_name=f"{n}.txt",
                keep_versions=5,
            )
            assert answer.version == version, answer
    kept = conn.execute("select count(*) as n from document_version_sources").fetchone()["n"]
    assert kept == 3 * KEPT_DOCUMENTS
    conn.execute("analyze documents; analyze document_version_sources")

    tx = new_conn(upgrade_window_schema.url, autocommit=False)
    for dry_run in ("true", "false"):
        statement = f"select cleanup_kept_version_bytes(5, 100, {dry_run}) as r"
        read = read_by(tx, "document_version_sources", statement) + read_by(tx, "documents", statement)
        assert tx.execute(statement).fetchone()["r"]["versions"] == 0
        if upgrade_window_schema.hardened:  # the dry run's join may fetch one kept row before it finds nothing owed
            assert read <= 2, f"dry_run={dry_run}: {read}"
        else:  # the defect: every kept version is joined to its document to find nothing
            assert read >= kept, f"dry_run={dry_run}: {read}"
    tx.rollback()

    # Under 3 versions kept, each document owes version 1: found, and removed.
    removed = IngestionRpc(conn).cleanup_kept_bytes(keep_versions=3, limit=1000, dry_run=False)
    assert removed.versions == KEPT_DOCUMENTS
    assert conn.execute("select distinct version from document_version_sources order by 1").fetchall() == [
        {"version": 2},
        {"version": 3},
    ]
    again = new_conn(upgrade_window_schema.url, autocommit=False)
    read = read_by(again, "document_version_sources", "select cleanup_kept_version_bytes(3, 100, false) as r")
    again.rollback()
    if upgrade_window_schema.hardened:  # a constant, however many versions are kept
        assert read <= 2, read
