"""A cancelled import batch takes no new files (migration …_cancelled_batches_take_no_files.sql).

`ingest cancel` on a batch whose folder is still being enqueued: before the migration every
later file went in, the batch reopened (`processing`) and the new jobs were built. At head
the enqueue is refused (SQLSTATE IF002), its transaction rolls back (document and bytes
with it), and `ingest enqueue` stops there with one line. Each test runs just before the
migration (where it observes the bug) and at head; the blocked interleaving is forced with
the cancel's open transaction, observed through pg_blocking_pids.
"""

from __future__ import annotations

import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.errors import BatchWasCancelled
from ingestion_pipeline.operations.enqueue import EnqueueRefused
from ingestion_pipeline.settings import load_settings
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import (
    Background,
    backend_pid,
    batch,
    documents_of,
    enqueue_into,
    seed_batch,
    wait_until_blocked,
)
from tests.old_enqueue import enqueue_files


def open_jobs(conn, batch_id) -> int:
    return conn.execute(
        "select count(*) as n from ingestion_jobs where batch_id = %s and status in ('pending', 'processing')",
        (batch_id,),
    ).fetchone()["n"]


def test_a_file_enqueued_after_the_cancel_is_refused(cancelled_batch_schema, new_conn):
    conn = new_conn(cancelled_batch_schema.url)
    batch_id = seed_batch(conn)
    enqueue_into(conn, batch_id)
    assert AnySchemaRpc(conn).cancel_batch(batch_id).ok

    if cancelled_batch_schema.hardened:
        with pytest.raises(BatchWasCancelled, match="was cancelled: it takes no new files"):
            enqueue_into(conn, batch_id)
        assert (batch(conn, batch_id)["status"], open_jobs(conn, batch_id)) == ("cancelled", 0)
        assert documents_of(conn, batch_id) == 1  # the refused file's document went with it
    else:  # the bug: the cancelled batch reopens and its new job will be built
        enqueue_into(conn, batch_id)  # accepted
        assert (batch(conn, batch_id)["status"], open_jobs(conn, batch_id)) == ("processing", 1)


def test_an_enqueue_waiting_on_the_cancel_is_refused_once_it_commits(cancelled_batch_schema, new_conn):
    setup, canceller, uploader = (new_conn(cancelled_batch_schema.url) for _ in range(3))
    batch_id = seed_batch(setup)
    enqueue_into(setup, batch_id)
    uploader_pid = backend_pid(uploader)
    with canceller.transaction():
        assert AnySchemaRpc(canceller).cancel_batch(batch_id).ok  # holds the batch row until commit
        upload = Background(lambda: enqueue_into(uploader, batch_id))
        wait_until_blocked(setup, uploader_pid, by=backend_pid(canceller))

    if cancelled_batch_schema.hardened:
        with pytest.raises(BatchWasCancelled):
            upload.join()
        assert (batch(setup, batch_id)["status"], open_jobs(setup, batch_id)) == ("cancelled", 0)
    else:
        upload.join()  # accepted
        assert (batch(setup, batch_id)["status"], open_jobs(setup, batch_id)) == ("processing", 1)


def test_ingest_enqueue_stops_at_the_first_file_after_the_cancel(cancelled_batch_schema, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / name).write_text(f"the file called {name}")
    settings = load_settings(database_url=cancelled_batch_schema.url)
    with make_pool(cancelled_batch_schema.url, settings) as pool:

        def cancel_after_the_first(entry):
            if entry.path.endswith("a.txt"):
                assert AnySchemaRpc(pool).cancel_batch(entry_batch(pool, entry)).ok

        if cancelled_batch_schema.hardened:
            with pytest.raises(EnqueueRefused) as refused:
                enqueue_files(pool, [folder], max_bytes=1_000_000, on_file=cancel_after_the_first)
            assert "b.txt: import batch" in str(refused.value)
            assert "was cancelled: it takes no new files; stopped there, 1 file(s) before it remain" in str(
                refused.value
            )
        else:
            report = enqueue_files(pool, [folder], max_bytes=1_000_000, on_file=cancel_after_the_first)
            assert [f.outcome for f in report.files] == ["new"] * 3  # all in, after the cancel


def entry_batch(pool, entry):
    with pool.connection() as conn:
        return conn.execute("select batch_id from documents where id = %s", (entry.document_id,)).fetchone()["batch_id"]
