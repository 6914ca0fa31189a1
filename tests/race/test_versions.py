"""The latest version always wins (migration …_document_versions.sql; docs/state-machine.md,
"Versions").

A file is enqueued again with other bytes while its older version is pending, being built,
or committing; three versions come in quick succession; a delete and a new version race in
either order; the operator retries a job whose version was superseded. Interleavings are
forced with transactions held open on one connection while another call blocks on their
rows, observed through pg_blocking_pids (each backend's pid read from its connection's
info, never by a query on a connection a background call is using); no sleep decides an
ordering.

Each test runs twice (`versions_schema`). Before the migration a document is its bytes: a
changed file is a second document, the older copy stays searchable, nothing tells the older
build to stop, and a delete of "the document" leaves the newer copy alive. At head the file
is one document (its key), each enqueue of other bytes a new version that cancels the older
version's job, whose worker is refused from then on; at quiescence exactly the latest
version's text is searchable.
"""

from __future__ import annotations

import hashlib
from uuid import UUID

import psycopg
import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.models import ClaimedJob
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.processing import chunk_sections, parse
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from ingestion_pipeline.worker.artifacts import write_generation
from tests.any_schema_rpc import OLD_SQL, AnySchemaRpc
from tests.conftest import Schema
from tests.helpers import Background, enqueue_bytes, wait_until_blocked

FOLDER = "file:///srv/docs/"
FENCE_REFUSED = "IF001"


def text_of(version: int, title: str = "Pricing") -> str:
    return f"# {title}\n\nThe premium plan costs {10 + 5 * version} dollars per month.\n"


def put(conn: psycopg.Connection, name: str, text: str) -> UUID:
    """Enqueue `text` as the file `name` on `conn` (in its open transaction, if any) the way
    each schema's client did; the document it went to. At head: by key, a new version when
    the bytes differ. Before: a document per distinct bytes (the content-addressed insert)."""
    content = text.encode()
    sha256 = hashlib.sha256(content).hexdigest()
    rpc = AnySchemaRpc(conn)
    if rpc.has_versions:
        answer = enqueue_bytes(
            conn,
            rpc.enqueue_version,
            content,
            collection="default",
            source_key=FOLDER + name,
            source_name=name,
            mime_type="text/markdown",
        )
        assert answer.ok, answer
        return answer.document_id
    row = conn.execute(
        OLD_SQL["insert_document"],
        {
            "batch_id": None,
            "source_name": name,
            "content_sha256": sha256,
            "byte_size": len(content),
            "mime_type": "text/markdown",
        },
    ).fetchone()
    conn.execute(OLD_SQL["insert_document_source"], {"document_id": row["id"], "content": content})
    assert rpc.enqueue(row["id"]).ok
    return row["id"]


def claim(conn: psycopg.Connection, worker: str = "W") -> ClaimedJob:
    [job] = AnySchemaRpc(conn).claim(worker)
    return job


def build(conn: psycopg.Connection, job: ClaimedJob, worker: str = "W") -> UUID:
    """What a worker does between its claim and its commit: begin a generation, parse the
    bytes stored now, write the rows. The generation id."""
    begun = AnySchemaRpc(conn).begin_generation(job.job_id, job.document_id, worker, lease_token=job.lease_token)
    assert begun.ok, begun
    content = conn.execute(query("load_document_source"), {"document_id": job.document_id}).fetchone()["content"]
    parsed = parse(bytes(content), job.source_name, max_bytes=1 << 20)
    write_generation(
        conn, job.document_id, begun.generation_id, parsed, chunk_sections(parsed.sections), check_lease=lambda: None
    )
    return begun.generation_id


def commit(conn: psycopg.Connection, job: ClaimedJob, generation_id: UUID, worker: str = "W"):
    return AnySchemaRpc(conn).commit_and_complete(
        job.job_id, job.document_id, generation_id, worker_id=worker, lease_token=job.lease_token
    )


def drain(url: str) -> None:
    settings = load_settings(database_url=url, retry_backoff_seconds=0, parse_processes=0)
    with make_pool(url, settings) as pool:
        Worker(pool, settings, rpc=AnySchemaRpc(pool)).run(drain=True)


def live(conn: psycopg.Connection, name: str) -> list[UUID]:
    rows = conn.execute(
        "select id from documents where source_name = %s and deleted_at is null order by created_at", (name,)
    )
    return [row["id"] for row in rows]


def searchable(conn: psycopg.Connection, name: str) -> set[str]:
    """The committed text of every live document called `name`: what a search can find."""
    rows = conn.execute(
        "select c.content from committed_document_chunks c join documents d on d.id = c.document_id "
        "where d.source_name = %s and d.deleted_at is null",
        (name,),
    )
    return {" ".join(row["content"].split()) for row in rows}


def found(version: int) -> str:
    return f"The premium plan costs {10 + 5 * version} dollars per month."


def assert_only(conn: psycopg.Connection, name: str, version: int) -> None:
    texts = searchable(conn, name)
    assert len(live(conn, name)) == 1 and texts and all(found(version) in t for t in texts), texts


def outcomes(conn: psycopg.Connection, document_id: UUID) -> list[tuple[int, str | None]]:
    history = AnySchemaRpc(conn).document_history(document_id=document_id)
    return sorted((v.version, v.outcome) for v in history.versions)


def assert_refused(conn: psycopg.Connection, job: ClaimedJob, generation_id: UUID) -> None:
    """Every later call of the superseded build is refused, its rows by the artifact fence."""
    rpc = AnySchemaRpc(conn)
    assert rpc.heartbeat(job.job_id, "W", lease_token=job.lease_token).lease_lost
    assert commit(conn, job, generation_id).lease_lost
    with pytest.raises(psycopg.Error) as refused:
        conn.execute(
            "insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count) "
            "values (%s, %s, 99, 'a late chunk of the older version', 6)",
            (job.document_id, generation_id),
        )
    assert refused.value.sqlstate == FENCE_REFUSED


# -- a new version while the older one is being built -------------------------------------


def test_a_new_version_takes_over_from_the_older_build(versions_schema: Schema, new_conn):
    conn = new_conn(versions_schema.url)
    first = put(conn, "pricing.md", text_of(1))
    job = claim(conn)
    generation_id = build(conn, job)  # its rows are in; its commit is next

    second = put(conn, "pricing.md", text_of(2))
    if versions_schema.hardened:
        assert second == first  # one document, version 2
        assert_refused(conn, job, generation_id)
        drain(versions_schema.url)
        assert_only(conn, "pricing.md", 2)
        assert outcomes(conn, first) == [(1, "superseded"), (2, "indexed")]
    else:  # a second document: the older build commits, and both copies stay searchable
        assert second != first and commit(conn, job, generation_id).ok
        drain(versions_schema.url)
        assert len(live(conn, "pricing.md")) == 2 and len(searchable(conn, "pricing.md")) == 2


@pytest.mark.parametrize("first_in", ["older_commit", "new_version"])
def test_an_older_commit_and_a_new_version_serialize(versions_schema: Schema, new_conn, first_in):
    """The older build's commit and the enqueue of a newer version, each held open while the
    other starts: whichever holds the job's row first wins it, and no older version ever
    commits after a newer one exists."""
    setup, committer, uploader = (new_conn(versions_schema.url) for _ in range(3))
    document_id = put(setup, "pricing.md", text_of(1))
    job = claim(setup)
    generation_id = build(setup, job)

    if first_in == "older_commit":
        with committer.transaction():
            assert commit(committer, job, generation_id).ok
            upload = Background(lambda: put(uploader, "pricing.md", text_of(2)))
            if versions_schema.hardened:  # waits for the commit's job row
                wait_until_blocked(setup, uploader.info.backend_pid, by=committer.info.backend_pid)
            else:
                upload.join()  # another document: nothing to wait for
        upload.join()
    else:
        with uploader.transaction():
            put(uploader, "pricing.md", text_of(2))
            late = Background(lambda: commit(committer, job, generation_id))
            if versions_schema.hardened:  # waits for the new version's hold on the job
                wait_until_blocked(setup, committer.info.backend_pid, by=uploader.info.backend_pid)
            else:
                late.join()
        answer = late.join()
        assert answer.lease_lost if versions_schema.hardened else answer.ok

    drain(versions_schema.url)
    if versions_schema.hardened:
        assert_only(setup, "pricing.md", 2)
        older = "replaced" if first_in == "older_commit" else "superseded"
        assert outcomes(setup, document_id) == [(1, older), (2, "indexed")]
    else:
        assert len(live(setup, "pricing.md")) == 2 and len(searchable(setup, "pricing.md")) == 2


def test_three_versions_in_quick_succession_leave_the_third(versions_schema: Schema, new_conn):
    setup, second, third = (new_conn(versions_schema.url) for _ in range(3))
    document_id = put(setup, "pricing.md", text_of(1))
    with second.transaction():
        put(second, "pricing.md", text_of(2))
        racing = Background(lambda: put(third, "pricing.md", text_of(3)))
        if versions_schema.hardened:  # the third waits for the second's hold on the first's job
            wait_until_blocked(setup, third.info.backend_pid, by=second.info.backend_pid)
        else:
            racing.join()
    racing.join()

    drain(versions_schema.url)
    if versions_schema.hardened:
        assert_only(setup, "pricing.md", 3)
        assert outcomes(setup, document_id) == [(1, "superseded"), (2, "superseded"), (3, "indexed")]
        jobs = setup.execute(
            "select document_version, status, stage from ingestion_jobs where document_id = %s "
            "order by document_version",
            (document_id,),
        ).fetchall()
        assert [(j["document_version"], j["status"], j["stage"]) for j in jobs] == [
            (1, "cancelled", "superseded"),
            (2, "cancelled", "superseded"),
            (3, "completed", "indexed"),
        ]
    else:  # three documents, three copies searchable
        assert len(live(setup, "pricing.md")) == 3 and len(searchable(setup, "pricing.md")) == 3


def test_a_delete_and_a_new_version_race_in_either_order(versions_schema: Schema, new_conn):
    """Delete first, then the new version: the file is back, as its new bytes. The new
    version first, then the delete of the document: nothing of the file is left."""
    setup, deleter, uploader = (new_conn(versions_schema.url) for _ in range(3))
    for name in ("pricing.md", "terms.md"):
        put(setup, name, text_of(1, title=name))
    drain(versions_schema.url)

    # Delete first: the enqueue waits for it (head), then makes the key anew.
    [old] = live(setup, "pricing.md")
    with deleter.transaction():
        assert AnySchemaRpc(deleter).delete_document(old).ok
        upload = Background(lambda: put(uploader, "pricing.md", text_of(2)))
        if versions_schema.hardened:
            wait_until_blocked(setup, uploader.info.backend_pid, by=deleter.info.backend_pid)
        else:
            upload.join()
    upload.join()

    # The new version first: the delete waits for it (head), then deletes the document with
    # its new version.
    [terms] = live(setup, "terms.md")
    with uploader.transaction():
        put(uploader, "terms.md", text_of(2, title="terms.md"))
        deleting = Background(lambda: AnySchemaRpc(deleter).delete_document(terms))
        if versions_schema.hardened:
            wait_until_blocked(setup, deleter.info.backend_pid, by=uploader.info.backend_pid)
        else:
            deleting.join()
    assert deleting.join().ok

    drain(versions_schema.url)
    assert_only(setup, "pricing.md", 2)
    if versions_schema.hardened:
        assert live(setup, "terms.md") == [] and searchable(setup, "terms.md") == set()
    else:  # the newer copy was another document: the delete left it searchable
        assert len(live(setup, "terms.md")) == 1 and searchable(setup, "terms.md")


def test_a_retry_of_a_job_whose_version_was_superseded_is_refused(versions_schema: Schema, new_conn):
    conn = new_conn(versions_schema.url)
    rpc = AnySchemaRpc(conn)
    put(conn, "pricing.md", text_of(1))
    job = claim(conn)
    assert rpc.fail_or_retry(
        job.job_id, job.document_id, worker_id="W", lease_token=job.lease_token, error_message="the parser gave up"
    ).ok
    put(conn, "pricing.md", text_of(2))  # no job open: a new version (head), a new document (before)

    answer = rpc.retry_failed(job_ids=[job.job_id])
    drain(versions_schema.url)
    if versions_schema.hardened:
        assert answer.retried == 0 and [(r.job_id, r.reason) for r in answer.refused] == [(job.job_id, "superseded")]
        assert_only(conn, "pricing.md", 2)
    else:  # the older bytes are indexed again, beside the newer ones
        assert answer.retried == 1
        assert len(live(conn, "pricing.md")) == 2 and len(searchable(conn, "pricing.md")) == 2
