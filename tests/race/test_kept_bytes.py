"""The kept-bytes cleanup racing the enqueue of a new version (…_kept_version_bytes_and_
collections.sql; docs/state-machine.md, "Bytes and cleanup"). At head only: the table is new,
so there is no schema before it to observe a bug on.

The enqueue of version 3 (INGEST_KEEP_VERSIONS = 2) holds its transaction open after it kept
version 2's bytes; the janitor's cleanup runs meanwhile. It must neither wait for the enqueue
(a lock timeout turns a wait into an error, so nothing here depends on timing) nor remove
bytes the newest two versions need; once the enqueue commits, the next pass removes
version 1's, which only then is owed.
"""

from __future__ import annotations

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.sources import enqueue_content

KEY = "app://notes/pricing"


def enqueue(conn, version: int, keep_versions: int) -> None:
    content = f"pricing, version {version}".encode()
    answer = enqueue_content(conn, content, source_key=KEY, source_name="pricing.txt", keep_versions=keep_versions)
    assert answer.version == version, answer


def kept(conn) -> list[int]:
    rows = conn.execute("select version from document_version_sources order by version").fetchall()
    return [row["version"] for row in rows]


def test_cleanup_during_an_open_new_version_neither_waits_nor_removes_what_is_kept(new_conn, db_url):
    setup = new_conn(db_url)
    for version in (1, 2):
        enqueue(setup, version, keep_versions=2)
    assert kept(setup) == [1]

    enqueuer = new_conn(db_url, autocommit=False)
    enqueue(enqueuer, 3, keep_versions=2)  # version 2's bytes kept, not committed yet

    janitor = new_conn(db_url)
    janitor.execute("set lock_timeout = '5s'")
    during = IngestionRpc(janitor).cleanup_kept_bytes(keep_versions=2, limit=100, dry_run=False)
    # Its snapshot: latest version 2, version 1 kept (within the newest two): nothing owed.
    assert during.versions == 0
    enqueuer.commit()

    assert kept(setup) == [1, 2]
    after = IngestionRpc(janitor).cleanup_kept_bytes(keep_versions=2, limit=100, dry_run=False)
    assert after.versions == 1
    assert kept(setup) == [2]
