"""The Python API (`Index`, ingestion_pipeline/api/) on each thing it is opened with: a plain
psycopg connection (tuple rows, not in autocommit mode), a psycopg_pool.ConnectionPool of the
caller's, a URL, nothing; and its errors, one line each. Real databases throughout."""

from __future__ import annotations

import time
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from ingestion_pipeline import Index
from ingestion_pipeline.api import (
    DatabaseUnavailable,
    DocumentNotFound,
    EnqueuedFile,
    IngestError,
    JobResult,
    Reader,
    SchemaTooOld,
    UnknownCollection,
)
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import source_key_of
from ingestion_pipeline.settings import load_settings

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
LEASES = SAMPLES / "postgres-leases.md"
LEASES_TITLE = "Leases and fencing in a PostgreSQL job queue"


def live_documents(url: str) -> int:
    """Live documents as another session sees them: what was committed."""
    with psycopg.connect(url) as conn:
        row = conn.execute("select count(*) from documents where deleted_at is null").fetchone()
    assert row is not None
    return int(row[0])


def test_a_plain_connection_keeps_its_rows_and_gets_a_transaction_per_call(db_url: str, tmp_path: Path) -> None:
    tea = tmp_path / "tea.txt"
    tea.write_text("Oolong is rolled and oxidised between green and black tea.\n")
    with psycopg.connect(db_url) as conn, Index.open(conn) as index:
        assert not conn.autocommit and conn.row_factory is tuple_row

        index.enqueue(LEASES)  # committed when the call returns: another session sees it
        assert conn.info.transaction_status == TransactionStatus.IDLE
        assert live_documents(db_url) == 1

        conn.execute("select 1")  # the caller's own transaction: the call joins it, as a savepoint
        index.enqueue(tea)
        assert conn.info.transaction_status == TransactionStatus.INTRANS
        assert live_documents(db_url) == 1
        conn.rollback()
        assert live_documents(db_url) == 1

        worked = index.work(drain=True, parse_processes=0)
        assert worked.counts["completed"] == 1
        [hit] = index.search("lease fencing")
        assert hit.title == LEASES_TITLE
        assert index.show(LEASES).indexed_version == 1
        [batch] = index.status().batches
        assert (batch.status, batch.completed) == ("completed", 1)

        assert conn.row_factory is tuple_row
        assert conn.execute("select 1 as one").fetchone() == (1,)
        assert conn.info.transaction_status == TransactionStatus.INTRANS  # the select above, the caller's
    assert conn.closed  # by the caller's `with`, not by the index


def test_a_pool_of_the_callers_with_progress_callbacks(db_url: str) -> None:
    files: list[EnqueuedFile] = []
    jobs: list[JobResult] = []
    with ConnectionPool(db_url, min_size=1, max_size=2) as pool:
        with Index.open(pool) as index:
            report = index.enqueue([LEASES, SAMPLES / "tea-notes.txt"], progress=files.append)
            worked = index.work(drain=True, parse_processes=0, progress=jobs.append)
            assert index.search("lease fencing")[0].title == LEASES_TITLE
            assert index.show(source_key_of(LEASES)).indexed_version == 1
        assert [f.path for f in files] == [f.path for f in report.files]
        assert sorted(job.source_name for job in jobs) == ["postgres-leases.md", "tea-notes.txt"]
        assert worked.counts["completed"] == 2
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("select 1").fetchone() == (1,)


def test_a_url_opens_a_pool_of_its_own_and_closing_closes_it(db_url: str) -> None:
    def connections_of_the_index() -> int:
        with psycopg.connect(db_url) as conn:
            row = conn.execute(
                "select count(*) from pg_stat_activity where datname = current_database() "
                "and application_name = 'ingest-python'"
            ).fetchone()
        assert row is not None
        return int(row[0])

    with Index.open(db_url) as index:
        assert index.url == db_url
        assert index.run([LEASES]).worked.counts["completed"] == 1
        assert connections_of_the_index() >= 1
    # A closed connection's backend ends after the client has gone, not with it (a fresh-clone
    # run counted one still there): its end is awaited; a pool left open would keep them forever.
    deadline = time.monotonic() + 30
    while connections_of_the_index() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections_of_the_index() == 0
    with pytest.raises(IngestError, match="this index is closed"):
        index.search("lease")


def test_no_arguments_resolves_the_database_as_ingest_does(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    with Index.open() as index:
        assert index.url == db_url
        assert index.status().batches == []
    # Settings given instead of the environment's: their URL, as `--database-url` overrides.
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    with Index.open(settings=load_settings(database_url=db_url)) as index:
        assert index.url == db_url


def test_an_unknown_collection_is_the_commands_error(db_url: str) -> None:
    with Index.open(db_url) as index:
        index.enqueue(LEASES)
        for call in (
            lambda: index.search("lease", collections="handbok"),
            lambda: index.search("lease", collections=["default", "handbok"], mode="lexical"),
            lambda: index.status(collection="handbok"),
            lambda: index.show(LEASES, collection="handbok"),
        ):
            with pytest.raises(UnknownCollection) as refused:
                call()
            assert refused.value.name == "handbok"


def test_a_document_not_found_says_where_it_was_looked_for(db_url: str) -> None:
    with Index.open(db_url) as index:
        with pytest.raises(DocumentNotFound, match=r"^no document file://.*/nowhere\.md in collection 'default'$"):
            index.show("nowhere.md")
        with pytest.raises(DocumentNotFound, match=r"^no document 00000000-0000-0000-0000-000000000000$"):
            index.show("00000000-0000-0000-0000-000000000000")


def test_a_database_that_cannot_be_reached_is_one_line() -> None:
    with pytest.raises(DatabaseUnavailable) as refused:
        Index.open("postgresql://nobody@127.0.0.1:1/nothing")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("cannot connect to nobody@127.0.0.1:1/nothing: "), message


def test_an_unmigrated_database_says_to_migrate(empty_db_url: str) -> None:
    with pytest.raises(IngestError, match=r"pending migration\(s\).*run `ingest db migrate`"):
        Index.open(empty_db_url)
    with (
        psycopg.connect(empty_db_url) as conn,
        Index.open(conn) as index,
        pytest.raises(SchemaTooOld, match="ingest db migrate"),
    ):
        index.search("lease", mode="lexical")


def test_searching_as_a_reader_inside_the_callers_transaction_is_refused(db_url: str) -> None:
    """An app reader's role is set for the rest of the transaction the search runs in."""
    with psycopg.connect(db_url) as conn, Index.open(conn) as index:
        assert index.search("lease", reader=Reader(), mode="lexical") == []  # outside one: fine
        conn.execute("select 1")
        with pytest.raises(IngestError, match="outside a transaction"):
            index.search("lease", reader=Reader(), mode="lexical")
        current = conn.execute("select current_user").fetchone()
        assert current is not None and current[0] != "anon"


def test_the_root_package_exports_index_lazily() -> None:
    import ingestion_pipeline

    assert ingestion_pipeline.Index is Index
    with pytest.raises(AttributeError):
        _ = ingestion_pipeline.Nothing  # type: ignore[attr-defined]


def test_sync_on_a_plain_connection_mirrors_a_folder(db_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nThe first note.\n")
    (folder / "b.md").write_text("# Beta\n\nThe second note.\n")
    with psycopg.connect(db_url) as conn, Index.open(conn) as index:
        first = index.sync(folder, collection="notes")
        assert (first.counts["new"], first.failures) == (2, [])
        assert live_documents(db_url) == 2  # committed when the call returned
        (folder / "b.md").unlink()
        second = index.sync(folder, collection="notes")
        assert (second.counts["unchanged"], second.counts["deleted"]) == (1, 1)
        assert live_documents(db_url) == 1
        assert conn.info.transaction_status == TransactionStatus.IDLE


def test_sections_and_readable_collections_as_a_reader(db_url: str, tmp_path: Path) -> None:
    """A document's text as the readers' RPC gives it: all of it to the owner, a public
    collection's to an anonymous reader, nothing of a private one's."""
    otters = tmp_path / "otters.md"
    otters.write_text("# River otters\n\nThey hold paws while they sleep.\n")
    with Index.open(db_url) as index:
        index.enqueue(LEASES, collection="handbook")
        index.enqueue(otters)
        index.work(drain=True, parse_processes=0)
        with psycopg.connect(db_url) as conn:
            IngestionRpc(conn).add_collection("handbook", public=True)
        leases = index.show(LEASES, collection="handbook").document_id
        private = index.show(otters).document_id

        sections = index.sections(leases)
        assert sections[0].heading == LEASES_TITLE and sections[0].page == 1
        assert [s.heading for s in sections[1:]] == ["Why fencing matters", "Index generations"]
        assert "FOR UPDATE SKIP LOCKED" in sections[0].content
        assert index.sections(private)[0].content.startswith("River otters")

        anon = Reader()
        assert index.sections(leases, reader=anon) == sections
        assert index.sections(private, reader=anon) == []
        assert index.readable_collections() is None  # the owner reads every collection
        assert index.readable_collections(reader=anon) == ["handbook"]
        assert index.readable_collections(reader=Reader(uuid4())) == ["handbook"]


def test_a_reader_gets_one_answer_for_a_private_collection_and_an_absent_one(db_url: str, tmp_path: Path) -> None:
    """Issue 58, defect 4: `Index.search(reader=...)` checks the names it is given as that
    reader, so a name it may not read and a name that does not exist get the same one line,
    with no hint that the private one exists; the owner is still told of a typo."""
    otters = tmp_path / "otters.md"
    otters.write_text("# River otters\n\nThey hold paws while they sleep.\n")
    member = uuid4()
    with Index.open(db_url) as index:
        index.enqueue(LEASES, collection="handbook")
        index.enqueue(otters, collection="secret")
        index.work(drain=True, parse_processes=0)
        with psycopg.connect(db_url) as conn:
            rpc = IngestionRpc(conn)
            rpc.add_collection("handbook", public=True)
            assert rpc.grant_collection("secret", member).ok

        for reader in (Reader(), Reader(uuid4())):
            answers = {}
            for name in ("secret", "nosuch"):
                with pytest.raises(UnknownCollection) as refused:
                    index.search("otters", mode="lexical", collections=[name], reader=reader)
                answers[name] = str(refused.value)
            assert answers == {"secret": "no collection 'secret'", "nosuch": "no collection 'nosuch'"}
            with pytest.raises(UnknownCollection, match=r"^no collection 'secret'$"):  # beside a readable one too
                index.search("otters", mode="lexical", collections=["handbook", "secret"], reader=reader)
            hits = index.search("fencing", mode="lexical", collections="handbook", reader=reader)
            assert [hit.collection for hit in hits] == ["handbook"]

        # a member reads its private collection by name; the owner reads it, and is told of a typo
        member_hits = index.search("otters", mode="lexical", collections="secret", reader=Reader(member))
        owner_hits = index.search("otters", mode="lexical", collections="secret")
        assert [hit.collection for hit in member_hits + owner_hits] == ["secret", "secret"]
        with pytest.raises(UnknownCollection, match="`ingest collection add nosuch` creates it"):
            index.search("otters", mode="lexical", collections="nosuch")
