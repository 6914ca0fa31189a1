"""Test helpers: seed rows, snapshot state, and observe blocking between connections."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import psutil
import psycopg

from ingestion_pipeline.db import migrate
from ingestion_pipeline.db.models import VersionEnqueued
from ingestion_pipeline.operations.sources import store_source
from tests.any_schema_rpc import AnySchemaRpc


def seed_batch(conn: psycopg.Connection, name: str = "test batch") -> UUID:
    return AnySchemaRpc(conn).create_batch(name).batch_id


def seed_document(
    conn: psycopg.Connection, batch_id: UUID | None = None, content: bytes | None = None, name: str = "doc.txt"
) -> UUID:
    content = content if content is not None else f"document {uuid.uuid4()}".encode()
    row = conn.execute(
        """insert into documents (batch_id, source_name, mime_type, content_sha256, byte_size)
           values (%s, %s, 'text/plain', %s, %s) returning id""",
        (batch_id, name, hashlib.sha256(content).hexdigest(), len(content)),
    ).fetchone()
    conn.execute("insert into document_sources (document_id, content) values (%s, %s)", (row["id"], content))
    return row["id"]


def seed_job(
    conn: psycopg.Connection, batch_id: UUID | None = None, max_attempts: int = 3, kind: str = "index"
) -> tuple[UUID, UUID]:
    """A document with one pending job; returns (document_id, job_id)."""
    document_id = seed_document(conn, batch_id)
    result = AnySchemaRpc(conn).enqueue(document_id, batch_id=batch_id, kind=kind, max_attempts=max_attempts)
    assert result.ok, result
    return document_id, result.job_id


def enqueue_into(conn: psycopg.Connection, batch_id: UUID | None) -> tuple[UUID, UUID]:
    """One file's upload into `batch_id`, as `ingest enqueue` makes it: document, bytes and
    job in one transaction. Returns (document id, job id)."""
    with conn.transaction():
        return seed_job(conn, batch_id)


def documents_of(conn: psycopg.Connection, batch_id: UUID) -> int:
    return conn.execute("select count(*) as n from documents where batch_id = %s", (batch_id,)).fetchone()["n"]


def write_artifacts(
    conn: psycopg.Connection,
    document_id: UUID,
    generation_id: UUID,
    pages: int = 2,
    sections: int = 2,
    chunks: int = 3,
    word: str = "alpha",
) -> None:
    for i in range(pages):
        conn.execute(
            "insert into document_pages (document_id, index_generation_id, ordinal, content) values (%s, %s, %s, %s)",
            (document_id, generation_id, i, f"page {i} {word}"),
        )
    for i in range(sections):
        conn.execute(
            "insert into document_sections (document_id, index_generation_id, ordinal, heading, content) "
            "values (%s, %s, %s, %s, %s)",
            (document_id, generation_id, i, f"Section {i}", f"section {word}"),
        )
    for i in range(chunks):
        conn.execute(
            "insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count) "
            "values (%s, %s, %s, %s, 3)",
            (document_id, generation_id, i, f"chunk {i} about {word}"),
        )


def index_document(
    rpc: AnySchemaRpc, conn: psycopg.Connection, worker_id: str = "seed-worker", **artifact_counts
) -> tuple[UUID, UUID]:
    """Claim the next job and take it all the way to a committed generation and completion.
    Returns (document_id, generation_id)."""
    [job] = rpc.claim(worker_id)
    generation_id = rpc.begin_generation(job.job_id, job.document_id, worker_id).generation_id
    write_artifacts(conn, job.document_id, generation_id, **artifact_counts)
    counts = {
        "page_count": artifact_counts.get("pages", 2),
        "section_count": artifact_counts.get("sections", 2),
        "chunk_count": artifact_counts.get("chunks", 3),
    }
    assert rpc.commit_generation(job.job_id, job.document_id, generation_id, worker_id, counts).ok
    assert rpc.complete(job.job_id, job.document_id, worker_id=worker_id).ok
    return job.document_id, generation_id


def start_reindex_build(
    rpc: AnySchemaRpc, conn: psycopg.Connection, document_id: UUID, worker_id: str, **artifact_counts
):
    """Enqueue and claim a reindex of an indexed document, begin its generation and write
    its rows; the caller decides how the build ends. Returns (claimed job, generation_id)."""
    assert rpc.enqueue(document_id, kind="reindex").ok
    [claimed] = rpc.claim(worker_id)
    generation_id = rpc.begin_generation(claimed.job_id, document_id, worker_id).generation_id
    write_artifacts(conn, document_id, generation_id, **artifact_counts)
    return claimed, generation_id


def has_lease_deadline(conn: psycopg.Connection) -> bool:
    """True from the lease-token migration on (the deadline lives on the job row)."""
    return (
        conn.execute(
            "select count(*) as n from pg_attribute where attrelid = 'ingestion_jobs'::regclass "
            "and attname = 'lease_expires_at'"
        ).fetchone()["n"]
        == 1
    )


def make_lease_stale(conn: psycopg.Connection, job_id: UUID, seconds_ago: int = 3600) -> None:
    """The holder last renewed `seconds_ago`, and (where the schema keeps a deadline)
    the lease has expired: any claimer may take the job."""
    conn.execute(
        "update ingestion_jobs set locked_at = now() - make_interval(secs => %s) where id = %s", (seconds_ago, job_id)
    )
    if has_lease_deadline(conn):
        conn.execute(
            "update ingestion_jobs set lease_expires_at = now() - interval '1 second' where id = %s", (job_id,)
        )


def age_lease(conn: psycopg.Connection, job_id: UUID, seconds: int) -> None:
    """Move the lease `seconds` into the past, as if it had been claimed (or renewed) that
    much earlier: the deadline moves with it, so a live lease stays live for the rest of
    its window."""
    conn.execute(
        "update ingestion_jobs set locked_at = locked_at - make_interval(secs => %s) where id = %s", (seconds, job_id)
    )
    if has_lease_deadline(conn):
        conn.execute(
            "update ingestion_jobs set lease_expires_at = lease_expires_at - make_interval(secs => %s) where id = %s",
            (seconds, job_id),
        )


def job(conn: psycopg.Connection, job_id: UUID) -> dict:
    return conn.execute("select * from ingestion_jobs where id = %s", (job_id,)).fetchone()


def document(conn: psycopg.Connection, document_id: UUID) -> dict:
    return conn.execute("select * from documents where id = %s", (document_id,)).fetchone()


def batch(conn: psycopg.Connection, batch_id: UUID) -> dict:
    return conn.execute("select * from import_batches where id = %s", (batch_id,)).fetchone()


def snapshot(conn: psycopg.Connection) -> dict[str, list[str]]:
    """Every row of the state tables as text: equal snapshots mean nothing changed."""
    tables = [
        "import_batches",
        "documents",
        "ingestion_jobs",
        "index_generations",
        "document_pages",
        "document_sections",
        "document_chunks",
    ]
    return {
        table: [r["row"] for r in conn.execute(f"select t::text as row from {table} t order by t::text").fetchall()]
        for table in tables
    }


def backend_pid(conn: psycopg.Connection) -> int:
    """Take it before handing the connection to a Background call (it would wait)."""
    return conn.execute("select pg_backend_pid() as pid").fetchone()["pid"]


def wait_until_blocked(observer: psycopg.Connection, pid: int, by: int | None = None, timeout: float = 15.0) -> None:
    """Wait until backend `pid` is blocked on a lock (held by `by`, when given).

    This observes a state the test forced; it does not decide an ordering."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        blockers = observer.execute("select pg_blocking_pids(%s) as b", (pid,)).fetchone()["b"]
        if blockers and (by is None or by in blockers):
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never blocked{f' on {by}' if by else ''}")


def wait_until_client_blocked(
    observer: psycopg.Connection, application_name: str, by: int | None = None, timeout: float = 15.0
) -> None:
    """Wait until the statement of the client connected as `application_name` is blocked on
    a lock (held by backend `by`, when given), on whichever backend runs it: behind a
    transaction-mode pooler that is the server connection the pooler hands the client for
    this transaction, not the one its earlier pg_backend_pid() answered from (PgBouncer sets
    the client's application_name on it). `observer` must reach the server itself, in the
    same database; idle server connections that served the client before keep its name but
    are never blocked.

    This observes a state the test forced; it does not decide an ordering."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = observer.execute(
            "select pg_blocking_pids(pid) as b from pg_stat_activity "
            "where application_name = %s and datname = current_database()",
            (application_name,),
        ).fetchall()
        blockers = {pid for row in rows for pid in row["b"]}
        if blockers and (by is None or by in blockers):
            return
        time.sleep(0.01)
    raise AssertionError(f"client {application_name!r} never blocked{f' on {by}' if by else ''}")


class BusyMigrators:
    """Which threads found the migration lock taken (migrate._lock_busy is their report)."""

    def __init__(self, monkeypatch):
        self.threads: set[int] = set()
        monkeypatch.setattr(migrate, "LOCK_POLL_SECONDS", 0.05)
        monkeypatch.setattr(migrate, "_lock_busy", lambda: self.threads.add(threading.get_ident()))

    def wait_for(self, count: int, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while len(self.threads) < count:
            assert time.monotonic() < deadline, "the migrators never found the migration lock taken"
            time.sleep(0.01)


class Background:
    """Run a call in a thread and keep its result or exception for join()."""

    def __init__(self, target: Callable[[], object]):
        self.result = None
        self.error: BaseException | None = None

        def run():
            try:
                self.result = target()
            except BaseException as exc:  # noqa: BLE001 - re-raised in join()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 30.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "background call did not finish"
        if self.error:
            raise self.error
        return self.result


# -- document lifecycle (delete a document, cancel a batch) ------------------------------

DOCUMENT_TABLES = ("document_pages", "document_sections", "document_chunks", "index_generations", "document_sources")


def document_rows(conn: psycopg.Connection, document_id: UUID) -> dict[str, int]:
    """How many rows of the document each table still holds (artifacts, generations, bytes)."""
    return {
        table: conn.execute(f"select count(*) as n from {table} where document_id = %s", (document_id,)).fetchone()["n"]
        for table in DOCUMENT_TABLES
    }


def search_hits(conn: psycopg.Connection, text: str, limit: int = 100) -> list:
    """What `ingest search` answers (lexical mode, committed generations only; the search
    RPC answers at most 1,000): its document ids. On a schema before the RPC (the race tests'
    older migrations), the documents whose committed chunks match, which is what it answered."""
    from types import SimpleNamespace

    from ingestion_pipeline.search import search

    rpcs = "select pronargs from pg_proc where proname = 'search_documents'"
    arities = {row["pronargs"] for row in conn.execute(rpcs).fetchall()}
    if 6 in arities:  # this release's RPC: the query names its model
        return search(conn, text, limit=min(limit, 1000))
    if arities:  # the RPC before …_vector_search_in_scope_and_model.sql, as that release called it
        rows = conn.execute(
            "select document_id from search_documents(%s, null, 'lexical', %s)", (text, min(limit, 1000))
        ).fetchall()
        return [SimpleNamespace(document_id=row["document_id"]) for row in rows]
    rows = conn.execute(
        "select distinct document_id from committed_document_chunks "
        "where content_tsv @@ websearch_to_tsquery('english', %s) limit %s",
        (text, limit),
    ).fetchall()
    return [SimpleNamespace(document_id=row["document_id"]) for row in rows]


def searchable(conn: psycopg.Connection, document_id: UUID, text: str) -> bool:
    """Whether a search for `text` finds the document: `ingest search` where the schema has
    the search of this release, else the same question in plain SQL (a live document's
    committed chunk matching every word), for the race tests on older schemas."""
    if conn.execute(
        "select to_regprocedure('enqueue_document_version(text,text,text,text,bigint,text,uuid,integer,"
        "boolean,timestamptz,text)') is not null as current"
    ).fetchone()["current"]:
        return any(hit.document_id == document_id for hit in search_hits(conn, text))
    row = conn.execute(
        "select exists (select 1 from committed_document_chunks c join documents d on d.id = c.document_id "
        "where c.document_id = %s and d.deleted_at is null "
        "and to_tsvector('english', c.content) @@ plainto_tsquery('english', %s)) as found",
        (document_id, text),
    ).fetchone()
    return bool(row["found"])


def failing_index_checks(url: str, conn: psycopg.Connection) -> list[str]:
    """The checks `ingest health` runs (schema drift, stuck batches, counters vs rows,
    stale leases) that fail, each with its message; [] when all pass."""
    from ingestion_pipeline.health import run_index_checks

    checks = run_index_checks(url, AnySchemaRpc(conn).queue_health(), max_pending_age_seconds=10**6)
    return [f"{check.name}: {check.message}" for check in checks if check.needs_action]


def enqueue_bytes(conn: psycopg.Connection, enqueue, content: bytes, **fields) -> VersionEnqueued:
    """`content` enqueued under its key by `enqueue` (an rpc's enqueue_version) and, when the
    answer says so, stored, in one transaction on `conn` (a savepoint inside an open one):
    what `ingest enqueue` does per file."""
    with conn.transaction():
        answer = enqueue(content_sha256=hashlib.sha256(content).hexdigest(), byte_size=len(content), **fields)
        if answer.store_bytes:
            store_source(conn, answer, content)
    return answer


def index_folder(folder: object, db_url: str) -> float:
    """`ingest enqueue FOLDER` then `ingest work --drain`, through the CLI as a user runs
    them; the seconds both took."""
    from ingestion_pipeline.cli import main as ingest

    url = ["--database-url", db_url]
    started = time.monotonic()
    assert ingest(["enqueue", str(folder), *url]) == 0
    assert ingest(["work", "--drain", *url]) == 0
    return time.monotonic() - started


def postmasters(pgdata: Path) -> list[int]:
    """Server processes started on this data dir (the postmaster carries `-D <pgdata>`)."""
    found = []
    for proc in psutil.process_iter(attrs=["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(pgdata) in (proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found
