"""Two holes of the upgrade window, while the previous release's code still runs against a
database migrated to this release (issue 44, defects 8 and 10; migration
…_idle_janitor_passes_and_upgrade_window.sql; docs/state-machine.md, "Versions").

8. A document the previous release enqueued (keyless: its identity was its bytes) is being
   built when this release enqueues its file by key: the document adopts the key as its
   version 1, and the build in flight must still commit.
10. The previous release's enqueue of a file this release already indexed by key: its
   `on conflict (content_sha256)` insert must meet that document, not make a second live
   copy of the same bytes that search returns twice.

Each test runs twice (`upgrade_window_schema`): on the schema just before the migration,
where it observes the defect, and at head. The previous release's statements are its own
SQL (tests/sql/old_call_forms.sql); the interleaving is the order of the calls on two
connections, each committed before the next, so nothing depends on timing.
"""

from __future__ import annotations

import hashlib
from uuid import UUID

import psycopg

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.models import ClaimedJob
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import chunk_sections, parse
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from ingestion_pipeline.worker.artifacts import write_generation
from tests.any_schema_rpc import OLD_SQL
from tests.conftest import Schema
from tests.helpers import enqueue_bytes, search_hits

NAME = "pricing.md"
KEY = "file:///srv/docs/pricing.md"
TEXT = "# Pricing\n\nThe premium plan costs twenty dollars per month, billed yearly.\n"


def old_enqueue(conn: psycopg.Connection, content: bytes) -> tuple[str, UUID]:
    """What the previous release's `ingest enqueue` did for one file, in one transaction:
    the content-addressed insert; when it inserted nothing, the live document with those
    bytes is the file's (`duplicate`, or queued again when it had failed)."""
    sha256 = hashlib.sha256(content).hexdigest()
    with conn.transaction():
        row = conn.execute(
            OLD_SQL["insert_document"],
            {
                "batch_id": None,
                "source_name": NAME,
                "content_sha256": sha256,
                "byte_size": len(content),
                "mime_type": "text/markdown",
            },
        ).fetchone()
        if row is not None:
            conn.execute(OLD_SQL["insert_document_source"], {"document_id": row["id"], "content": content})
            assert IngestionRpc(conn).enqueue(row["id"]).ok
            return "queued", row["id"]
        existing = conn.execute(OLD_SQL["find_live_document"], {"content_sha256": sha256}).fetchone()
        assert existing is not None, "the insert met no live document with those bytes"
        if existing["status"] == "failed":
            assert IngestionRpc(conn).enqueue(existing["id"]).ok
            return "queued", existing["id"]
        return "duplicate", existing["id"]


def new_enqueue(conn: psycopg.Connection, content: bytes):
    """This release's enqueue of the file, by its key."""
    answer = enqueue_bytes(
        conn,
        IngestionRpc(conn).enqueue_version,
        content,
        collection="default",
        source_key=KEY,
        source_name=NAME,
        mime_type="text/markdown",
    )
    assert answer.ok, answer
    return answer


def build(conn: psycopg.Connection, job: ClaimedJob) -> UUID:
    """A worker between its claim and its commit: begin a generation, write its rows."""
    begun = IngestionRpc(conn).begin_generation(job.job_id, job.document_id, "W", lease_token=job.lease_token)
    assert begun.ok, begun
    content = conn.execute(query("load_document_source"), {"document_id": job.document_id}).fetchone()["content"]
    parsed = parse(bytes(content), job.source_name, max_bytes=1 << 20)
    write_generation(
        conn, job.document_id, begun.generation_id, parsed, chunk_sections(parsed.sections), check_lease=lambda: None
    )
    return begun.generation_id


def drain(url: str) -> None:
    settings = load_settings(database_url=url, retry_backoff_seconds=0, parse_processes=0)
    with make_pool(url, settings) as pool:
        Worker(pool, settings).run(drain=True)


def live_documents(conn: psycopg.Connection) -> list[dict]:
    return conn.execute(
        "select id, source_key, version, indexed_version, status from documents where deleted_at is null "
        "order by created_at, id"
    ).fetchall()


def test_adopting_a_keyless_document_whose_build_is_in_flight_lets_that_build_commit(
    upgrade_window_schema: Schema, new_conn
):
    url = upgrade_window_schema.url
    enqueuer, worker = new_conn(url), new_conn(url)
    content = TEXT.encode()
    outcome, document_id = old_enqueue(enqueuer, content)  # the previous release, before the upgrade
    assert outcome == "queued"
    [job] = IngestionRpc(worker).claim("W")
    generation_id = build(worker, job)  # its generation building, unversioned like its job

    adopted = new_enqueue(enqueuer, content)  # this release enqueues the file: the key is adopted
    assert (adopted.adopted, adopted.outcome, adopted.document_id, adopted.version) == (
        True,
        "already_queued",
        document_id,
        1,
    )

    committed = IngestionRpc(worker).commit_and_complete(
        job.job_id, document_id, generation_id, worker_id="W", lease_token=job.lease_token
    )
    if not upgrade_window_schema.hardened:  # the defect: the build of the very bytes adopted is refused
        assert not committed.ok and committed.reason == "version_superseded", committed
        return
    assert committed.ok, committed
    [document] = live_documents(enqueuer)
    assert (document["source_key"], document["version"], document["indexed_version"], document["status"]) == (
        KEY,
        1,
        1,
        "indexed",
    )
    generation = enqueuer.execute(
        "select status, document_version from index_generations where id = %s", (generation_id,)
    ).fetchone()
    assert (generation["status"], generation["document_version"]) == ("committed", 1)
    assert [hit.document_id for hit in search_hits(enqueuer, "premium plan")] == [document_id]


def test_the_previous_release_enqueueing_a_file_indexed_by_key_makes_no_second_copy(
    upgrade_window_schema: Schema, new_conn
):
    url = upgrade_window_schema.url
    conn = new_conn(url)
    content = TEXT.encode()
    keyed = new_enqueue(conn, content)
    drain(url)

    outcome, document_id = old_enqueue(conn, content)  # a worker host not upgraded yet
    drain(url)

    documents = live_documents(conn)
    hits = [hit.document_id for hit in search_hits(conn, "premium plan")]
    if not upgrade_window_schema.hardened:  # the defect: a second live document, found twice, forever
        assert outcome == "queued" and document_id != keyed.document_id
        assert len(documents) == 2 and sorted(map(str, hits)) == sorted(str(d["id"]) for d in documents)
        return
    assert (outcome, document_id) == ("duplicate", keyed.document_id)
    assert [(d["id"], d["source_key"], d["status"]) for d in documents] == [(keyed.document_id, KEY, "indexed")]
    assert hits == [keyed.document_id]
    assert IngestionRpc(conn).queue_health().keyless_duplicates == 0

    # The hash the previous release's insert met names the latest version only: a new version
    # of the file clears it, and that release's upload of the old bytes is a document again.
    changed = new_enqueue(conn, content.replace(b"twenty", b"thirty"))
    assert (changed.outcome, changed.version) == ("new_version", 2)
    outcome, again = old_enqueue(conn, content)
    assert outcome == "queued" and again != keyed.document_id


def test_a_failed_keyed_document_is_queued_again_by_the_previous_release_not_copied(
    upgrade_window_schema: Schema, new_conn
):
    """The previous release queued a failed duplicate again; met on the keyed document, that
    queues the keyed document's latest version."""
    conn = new_conn(upgrade_window_schema.url)
    content = TEXT.encode()
    keyed = new_enqueue(conn, content)
    [job] = IngestionRpc(conn).claim("W", limit=1)
    failed = IngestionRpc(conn).fail_or_retry(
        job.job_id, job.document_id, worker_id="W", lease_token=job.lease_token, error_message="parse failed"
    )
    assert failed.ok, failed

    outcome, document_id = old_enqueue(conn, content)
    if not upgrade_window_schema.hardened:
        assert outcome == "queued" and document_id != keyed.document_id
        return
    assert (outcome, document_id) == ("queued", keyed.document_id)
    open_job = conn.execute(
        "select document_version from ingestion_jobs where document_id = %s and status = 'pending'",
        (keyed.document_id,),
    ).fetchone()
    assert open_job["document_version"] == 1
