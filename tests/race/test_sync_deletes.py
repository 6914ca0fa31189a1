"""A sync's deletes (issue 44, defects 3 and 7; migration …_sync_deletes_under_the_listing_and_lease.sql).

Each test runs twice (`sync_deletes_schema`). Before the migration a sync deletes by id what
its listing found vanished, with nothing checked again: a version enqueued after the listing
is deleted with it, and a sync keeps deleting after `ingest source remove` returned; the
live keys of a source are read by a walk over the whole collection. At head each delete
carries the version the listing saw and the sync's lease, checked under the locks in the
delete's transaction, and the keys of a source are one index range.

Interleavings are forced with the sync's own hook (keep_lease, called before each delete)
and with a row lock held on another connection, observed through pg_blocking_pids; no
sleep decides an ordering.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from uuid import UUID

import psycopg
import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import prefix_end
from ingestion_pipeline.operations import source_sync
from ingestion_pipeline.operations.source_sync import SyncLeaseLost, sync_registered
from ingestion_pipeline.operations.sources import enqueue_bytes
from ingestion_pipeline.operations.sync import SyncOptions, sync_source
from ingestion_pipeline.settings import load_settings
from tests.conftest import Schema
from tests.helpers import Background, wait_until_blocked
from tests.reads import rows_read

OUTSIDE = 20_000  # keys of the collection outside the source's prefix


@pytest.fixture
def pool(sync_deletes_schema: Schema):
    settings = load_settings(database_url=sync_deletes_schema.url, retry_backoff_seconds=0)
    with make_pool(sync_deletes_schema.url, settings) as connection_pool:
        yield connection_pool


def write(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(f"The {name} heron waits.\n")


def live(conn: psycopg.Connection, key: str) -> dict | None:
    return conn.execute(
        "select id, version from documents where source_key = %s and deleted_at is null", (key,)
    ).fetchone()


def options(**more) -> SyncOptions:
    return SyncOptions(collection="share", max_bytes=100_000, **more)


def test_a_version_enqueued_after_the_listing_is_not_deleted(sync_deletes_schema, pool, new_conn, tmp_path):
    folder = tmp_path / "share"
    write(folder, ["alpha.txt", "beta.txt"])
    sync_source(pool, str(folder), options())
    (folder / "beta.txt").unlink()
    beta = (folder / "beta.txt").as_uri()
    deletes: list[bool] = []

    def back_in_the_folder(before_deletes: bool) -> None:
        """The listing is done and its vanished keys read: the file comes back, enqueued by
        someone else, before the sync deletes it."""
        if before_deletes:
            deletes.append(True)
        elif deletes == [True]:  # the first delete's turn
            deletes.append(False)
            (folder / "beta.txt").write_text("The beta heron came back.\n")
            enqueue_bytes(pool, (folder / "beta.txt").read_bytes(), source_key=beta, collection="share")

    report = sync_source(pool, str(folder), options(), keep_lease=back_in_the_folder)
    assert deletes == [True, False]
    conn = new_conn(sync_deletes_schema.url)
    if not sync_deletes_schema.hardened:
        assert report.counts["deleted"] == 1 and live(conn, beta) is None  # the bug: the new version went with it
        return
    assert report.counts["deleted"] == 0
    assert live(conn, beta)["version"] == 2  # the file in the folder has its live document
    assert sync_source(pool, str(folder), options()).counts["unchanged"] == 2


def blocked_by(observer: psycopg.Connection, pid: int, timeout: float = 15.0) -> int:
    """The backend blocked behind `pid` (the test forced it there; this only observes it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = observer.execute(
            "select pid from pg_stat_activity where %s = any (pg_blocking_pids(pid))", (pid,)
        ).fetchone()
        if row:
            return int(row["pid"])
        time.sleep(0.01)
    raise AssertionError(f"nothing blocked behind backend {pid}")


def test_a_source_removed_mid_deletes_stops_its_sync(sync_deletes_schema, pool, new_conn, tmp_path, monkeypatch):
    folder = tmp_path / "share"
    names = ["keep.txt", "x1.txt", "x2.txt", "x3.txt"]
    write(folder, names)
    rpc = IngestionRpc(pool)
    assert rpc.register_source("share", str(folder), collection="share").ok
    sync_registered(pool, "share", max_bytes=100_000)
    for name in names[1:]:
        (folder / name).unlink()
    observer, holder = new_conn(sync_deletes_schema.url), new_conn(sync_deletes_schema.url, autocommit=False)
    keys = {name: (folder / name).as_uri() for name in names}
    # Barrier 1: x2's row, held, so the sync's second delete waits inside its transaction.
    holder.execute("select 1 from documents where id = %s for update", (live(observer, keys["x2.txt"])["id"],))
    # Barrier 2: the sync's third delete starts once the remove has returned.
    removed = threading.Event()
    real_keeper = source_sync._keeper

    def keeper(rpc: IngestionRpc, name: str, token: int):
        keep, calls = real_keeper(rpc, name, token), []

        def keep_then_wait(before_deletes: bool) -> None:
            keep(before_deletes)
            calls.append(before_deletes)
            if True in calls and calls[calls.index(True) :].count(False) == 3:
                assert removed.wait(30)

        return keep_then_wait

    monkeypatch.setattr(source_sync, "_keeper", keeper)
    sync = Background(lambda: sync_registered(pool, "share", max_bytes=100_000))
    sync_pid = blocked_by(observer, holder.info.backend_pid)
    remove = Background(lambda: IngestionRpc(pool).remove_source("share"))
    if sync_deletes_schema.hardened:
        wait_until_blocked(observer, blocked_by(observer, sync_pid), by=sync_pid)  # the remove waits for it
    holder.rollback()
    assert remove.join().ok
    removed.set()

    if not sync_deletes_schema.hardened:
        sync.join()
        assert live(observer, keys["x3.txt"]) is None  # the bug: deleted after the remove returned
        return
    with pytest.raises(SyncLeaseLost):
        sync.join()
    assert live(observer, keys["x1.txt"]) is None and live(observer, keys["x2.txt"]) is None
    assert live(observer, keys["x3.txt"]) is not None  # the delete after the remove was refused
    assert live(observer, keys["keep.txt"]) is not None


def seed_documents(conn: psycopg.Connection, collection: str, prefix: str, count: int) -> None:
    """`count` live keyed documents (and their version 1), written directly: they are
    ballast for the reads under test, not queue state."""
    conn.execute(
        "with made as (insert into documents (collection, source_key, source_name, byte_size, version)"
        "              select %(collection)s, %(prefix)s || lpad(i::text, 6, '0'), 'f' || i, 1, 1"
        "                from generate_series(1, %(count)s) i returning id)"
        " insert into document_versions (document_id, version, content_sha256, byte_size, source_name,"
        "                                enqueued_at)"
        " select id, 1, repeat('0', 64), 1, 'f', now() - interval '1 hour' from made",
        {"collection": collection, "prefix": prefix, "count": count},
    )


def test_the_keys_of_a_source_cost_what_they_hold(sync_deletes_schema, new_conn):
    conn = new_conn(sync_deletes_schema.url, autocommit=False)
    seed_documents(conn, "share", "file:///srv/other/", OUTSIDE)
    seed_documents(conn, "share", "file:///srv/docs/", 10)
    seed_documents(conn, "share", "file:///srv/docs-old/", 5)  # a sibling prefix is not the source's
    conn.commit()
    conn.execute("analyze documents")
    conn.execute("analyze document_versions")
    conn.commit()

    params = {
        "collection": "share",
        "prefix": "file:///srv/docs/",
        "prefix_end": prefix_end("file:///srv/docs/"),
        "before": "infinity",
        "after": "",
        "limit": 500,
    }
    before = rows_read(conn)
    rows = conn.execute(query("live_keys_under_prefix"), params).fetchall()
    assert len(rows) == 10 and all(row["source_key"].startswith("file:///srv/docs/") for row in rows)
    read = rows_read(conn, since=before).get("documents", 0)
    conn.rollback()
    if not sync_deletes_schema.hardened:
        assert read >= OUTSIDE  # the bug: every key of the collection read
    else:
        assert read <= 50


def test_the_collection_list_counts_what_it_lists(db_url, new_conn):
    """Each collection's count reads its own live documents (before …_scoped_search_indexes'
    documents_live_by_collection, every collection's count walked every document)."""
    conn = new_conn(db_url, autocommit=False)
    seed_documents(conn, "big", "app://big/", OUTSIDE)
    for name in ("a", "b", "c", "d"):
        seed_documents(conn, name, f"app://{name}/", 2)
    conn.commit()
    conn.execute("analyze documents")
    conn.commit()
    before = rows_read(conn)
    listed = {row["name"]: row["documents"] for row in conn.execute(query("rpc_list_collections")).fetchall()}
    assert listed == {"big": OUTSIDE, "a": 2, "b": 2, "c": 2, "d": 2}
    read = rows_read(conn, since=before).get("documents", 0)
    conn.rollback()
    assert read <= OUTSIDE + 100


def test_a_delete_of_another_version_is_refused(sync_deletes_schema, pool):
    if not sync_deletes_schema.hardened:
        pytest.skip("delete_vanished_document is new in the migration")
    rpc = IngestionRpc(pool)
    first = enqueue_bytes(pool, b"one", source_key="app://x", collection="share")
    enqueue_bytes(pool, b"two", source_key="app://x", collection="share")
    refused = rpc.delete_vanished(first.document_id, 1)
    assert refused is not None and not refused.ok and refused.reason == "version_changed"
    assert rpc.delete_vanished(first.document_id, 2, source="nope", token=1).reason == "lease_lost"
    deleted = rpc.delete_vanished(UUID(str(first.document_id)), 2)
    assert deleted is not None and deleted.ok
