"""A sync's listing of the live keys under its source's prefix (`live_keys_under_prefix`,
IngestionRpc.live_keys_under; issue 58, defect 7) reads about as many rows as the source holds
keys, whatever the rest of the collection holds: 20,000 other documents, then 200,000
versions of them. Before the fix the walk of documents_collection_key_c was joined to
document_versions, and at 20,000 documents the join was planned as a hash join over a
sequential scan of every version: 20,018 versions read for a 10-key source (at 1,000,000
versions the planner chose a nested loop and read 12; which one it picks is the statistics'
choice). The listing now looks each version up by primary key, with no join to plan: 10
documents and 10 versions read at both sizes. (200,000 versions, not the 1,000,000 measured
when the defect was fixed: with no join left there is no plan to flip, and seeding a million
rows cost 15 s of the suite's 10 minutes on each server.)

Rows read are the transaction's pg_stat_xact_user_tables counters (tests/reads.py), not a time."""

from __future__ import annotations

import psycopg

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import LiveKey
from tests.default_embedder import default_embedder  # noqa: F401 - autouse: sync, then search as users do
from tests.reads import rows_read

SOURCE = "file:///srv/share/docs/"
KEYS = 10  # the source's live documents
OTHERS = 20_000  # the collection's documents outside the source
VERSIONS = 10  # of each other document, at the end: 200,000


def seed(conn: psycopg.Connection, prefix: str, count: int) -> None:
    """`count` live documents of collection `share` keyed like files under `prefix`, each with
    its version 1, enqueued an hour ago: ballast written directly as the owner, not queue state."""
    conn.execute(
        "with made as (insert into documents (collection, source_key, source_name, byte_size, version)"
        "              select 'share', %(prefix)s || 'f' || i || '.txt', 'f' || i || '.txt', 1, 1"
        "                from generate_series(1, %(count)s) i returning id)"
        " insert into document_versions (document_id, version, content_sha256, byte_size, source_name,"
        "                                enqueued_at)"
        " select id, 1, repeat('0', 64), 1, 'f', now() - interval '1 hour' from made",
        {"prefix": prefix, "count": count},
    )


def more_versions(conn: psycopg.Connection, prefix: str, versions: int) -> None:
    """Versions 2..`versions` of each document under `prefix`, the last one its latest."""
    conn.execute(
        "with updated as (update documents set version = %(versions)s"
        "                  where collection = 'share' and source_key like %(prefix)s || '%%' returning id)"
        " insert into document_versions (document_id, version, content_sha256, byte_size, source_name,"
        "                                enqueued_at)"
        " select id, n, repeat('0', 64), 1, 'f', now() - interval '1 hour'"
        "   from updated cross join generate_series(2, %(versions)s) n order by id, n",
        {"prefix": prefix, "versions": versions},
    )


def listing(conn: psycopg.Connection) -> tuple[list[LiveKey], dict[str, int]]:
    """The source's live keys as a sync lists them (one page of up to 1,000), and the rows read."""
    conn.execute("analyze documents")
    conn.execute("analyze document_versions")
    conn.commit()
    before = rows_read(conn)
    now = conn.execute("select now() as now").fetchone()["now"]
    page = IngestionRpc(conn).live_keys_under("share", SOURCE, before=now)
    read = rows_read(conn, since=before)
    conn.rollback()
    return page, read


def test_the_sync_listing_reads_what_the_source_holds(db_url, new_conn):
    conn = new_conn(db_url, autocommit=False)
    seed(conn, "file:///srv/share/archive/", OTHERS // 2)
    seed(conn, SOURCE, KEYS)
    seed(conn, "file:///srv/share/docs-old/", 5)  # a sibling prefix is not the source's
    seed(conn, "file:///srv/share/reports/", OTHERS // 2)
    conn.commit()
    expected = sorted(f"{SOURCE}f{n}.txt" for n in range(1, KEYS + 1))

    page, read = listing(conn)
    assert sorted(key.source_key for key in page) == expected
    # one version read per listed key (by primary key), and the documents of the range
    assert read.get("document_versions", 0) <= KEYS + 2, read
    assert read.get("documents", 0) <= KEYS + 2, read

    for prefix in ("file:///srv/share/archive/", "file:///srv/share/reports/"):
        more_versions(conn, prefix, VERSIONS)
    conn.commit()
    assert conn.execute("select count(*) as n from document_versions").fetchone()["n"] >= OTHERS * VERSIONS

    page, read = listing(conn)
    assert sorted(key.source_key for key in page) == expected
    assert read.get("document_versions", 0) <= KEYS + 2, read
    assert read.get("documents", 0) <= KEYS + 2, read
