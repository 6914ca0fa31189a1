"""`Index`: the Python API over one database (docs/python.md).

Each method calls the code the matching `ingest` command calls (operations/, worker/,
search/, the RPC client), with the same settings and the same errors (IngestError and its
kinds, one line each), and returns that code's typed result instead of printing it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.api.closing import ClosesOnExit
from ingestion_pipeline.db.connection import Database, borrow
from ingestion_pipeline.db.models import BatchReport
from ingestion_pipeline.db.ready import open_migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.enqueue import EnqueuedFile, EnqueueReport, enqueue_paths
from ingestion_pipeline.operations.lookup import parse_ref
from ingestion_pipeline.operations.selection import Selection
from ingestion_pipeline.operations.sources import SourceEnqueued, enqueue_bytes
from ingestion_pipeline.operations.sync import SyncOptions, SyncReport, sync_source
from ingestion_pipeline.processing import Embedder, embedder_from_settings
from ingestion_pipeline.search import (
    Hit,
    Mode,
    Passage,
    Reader,
    Section,
    hit_passages,
    readable_collections,
    readable_sections,
    search,
    search_passages,
)
from ingestion_pipeline.search.reading import require_readable
from ingestion_pipeline.settings import Settings, load_settings
from ingestion_pipeline.worker import JobResult, Worker, WorkerReport

from .connections import (
    DatabaseArgument,
    Opened,
    describe,
    one_line_errors,
    open_database,
    refuse_reader_in_transaction,
    unit_of_work,
)
from .progress import reporting
from .results import Document, RunReport, not_found

PathsArgument = str | Path | Iterable[str | Path]


class Index(ClosesOnExit):
    """The index in one database: enqueue, sync, work (drain the queue in this process),
    search, show, status. Open it with `Index.open(...)`; as a context manager it closes
    what it opened (its own pool), never a connection or pool it was given."""

    def __init__(self, opened: Opened, settings: Settings):
        self._opened = opened
        self.settings = settings
        self._embedder: Embedder | None = None
        self._closed = False

    @classmethod
    def open(cls, database: DatabaseArgument = None, *, settings: Settings | None = None) -> Index:
        """`database`: a URL; a psycopg connection (its row factory and autocommit mode
        are left as they are); a psycopg_pool.ConnectionPool; or nothing, for the database
        `ingest` uses (DATABASE_URL or INGEST_DATABASE_URL, else the embedded server of
        INGEST_DATA_DIR, by default the user's, started only when it is not running).
        `settings`: instead of the environment's (`load_settings(...)`). A URL or nothing
        needs a migrated database (`ingest db migrate`)."""
        chosen = settings or load_settings()
        with one_line_errors():
            return cls(open_database(database, chosen), chosen)

    @property
    def url(self) -> str:
        """The database's connection string (with its password: not for logs)."""
        return self._opened.url

    def close(self) -> None:
        """Close the pool the index opened; a connection or pool it was given stays open."""
        self._closed = True
        if self._opened.own_pool is not None:
            self._opened.own_pool.close()

    def __repr__(self) -> str:
        return f"<Index {describe(self._opened)}{' (closed)' if self._closed else ''}>"

    # Writing: files, bytes, sources.

    def enqueue(
        self,
        paths: PathsArgument,
        *,
        collection: str = DEFAULT_COLLECTION,
        batch: str | None = None,
        reindex: bool = False,
        max_attempts: int | None = None,
        progress: Callable[[EnqueuedFile], None] | None = None,
        show_progress: bool = False,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        new_collection: bool = False,
    ) -> EnqueueReport:
        """`ingest enqueue`: files, and the documents of folders (recursively; `include`,
        `exclude`: globs choosing otherwise), as one import batch, each file a document keyed by
        its path; its bytes, version and job in one transaction. NearCollection for a new
        `collection` named like an existing one (`kitchn`), unless `new_collection`."""
        with self._call() as db, reporting(progress, show=show_progress, desc="enqueue", unit="file") as notify:
            IngestionRpc(db).check_new_collection(collection, confirmed=new_collection)
            return enqueue_paths(
                db,
                _paths(paths),
                max_bytes=self.settings.max_file_bytes,
                batch_name=batch,
                reindex=reindex,
                max_attempts=max_attempts or self.settings.max_attempts,
                collection=collection,
                keep_versions=self.settings.keep_versions,
                on_file=notify,
                selection=Selection.of(include, exclude),
            )

    def enqueue_bytes(
        self,
        content: bytes,
        *,
        key: str,
        name: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        mime_type: str | None = None,
        max_attempts: int | None = None,
        new_collection: bool = False,
    ) -> SourceEnqueued:
        """Bytes an app holds, as the latest version of the document `key` names
        (`app://invoices/0042`); `name` and `mime_type` tell the parser what they are.
        `new_collection`: as `enqueue`'s."""
        with self._call() as db:
            IngestionRpc(db).check_new_collection(collection, confirmed=new_collection)
            return enqueue_bytes(
                db,
                content,
                source_key=key,
                source_name=name,
                collection=collection,
                mime_type=mime_type,
                max_attempts=max_attempts or self.settings.max_attempts,
                keep_versions=self.settings.keep_versions,
            )

    def sync(
        self,
        source: str | Path,
        *,
        collection: str = DEFAULT_COLLECTION,
        delete: bool = True,
        dry_run: bool = False,
        allow_empty: bool = False,
        progress: Callable[[str], None] | None = None,
        show_progress: bool = False,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        new_collection: bool = False,
    ) -> SyncReport:
        """`ingest sync`: one pass mirroring a folder or a URL (s3://bucket/prefix) into
        `collection`: new and changed documents enqueued (`include`, `exclude`: as `enqueue`'s;
        the files passed over are not the source's), vanished ones deleted. `new_collection`:
        as `enqueue`'s."""
        options = SyncOptions(
            collection=collection,
            max_bytes=self.settings.max_file_bytes,
            delete=delete,
            dry_run=dry_run,
            allow_empty=allow_empty,
            max_attempts=self.settings.max_attempts,
            keep_versions=self.settings.keep_versions,
            selection=Selection.of(include, exclude),
        )
        with self._call() as db, reporting(progress, show=show_progress, desc="sync", unit="file") as notify:
            IngestionRpc(db).check_new_collection(collection, confirmed=new_collection)
            on_entry = None if notify is None else lambda key, _counts: notify(key)
            return sync_source(db, str(source), options, on_entry=on_entry)

    # Indexing: the worker, in this process.

    def work(
        self,
        *,
        drain: bool = True,
        max_jobs: int | None = None,
        max_seconds: float | None = None,
        concurrency: int | None = None,
        parse_processes: int | None = None,
        embedder: str | None = None,
        stop: threading.Event | None = None,
        progress: Callable[[JobResult], None] | None = None,
        show_progress: bool = False,
    ) -> WorkerReport:
        """`ingest work`: claim and index jobs with the worker `ingest work` runs, until
        nothing is claimable (`drain`) or `stop` is set. `embedder`: instead of
        INGEST_EMBEDDER's (`ingest work --embedder`). The worker has a pool sized for its jobs
        in flight: the index's own, or, on a connection or pool it was given, one of its
        own to the same database, closed when it returns."""
        chosen = self._default_embedder() if embedder is None else embedder_from_settings(self.settings, embedder)
        with self._worker_pool() as pool, reporting(progress, show=show_progress, desc="work", unit="doc") as notify:
            worker = Worker(
                pool,
                self.settings,
                label="python",
                concurrency=concurrency,
                embedder=chosen,
                parse_processes=parse_processes,
            )
            return worker.run(drain=drain, max_jobs=max_jobs, max_seconds=max_seconds, stop=stop, on_result=notify)

    def run(
        self,
        paths: PathsArgument,
        *,
        collection: str = DEFAULT_COLLECTION,
        show_progress: bool = False,
        progress: Callable[[JobResult], None] | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        new_collection: bool = False,
    ) -> RunReport:
        """Enqueue `paths` (`include`, `exclude`, `new_collection`: as `enqueue`'s), then drain
        the queue: they are searchable when it returns (as are other jobs it found queued).
        `progress`: called per job indexed."""
        enqueued = self.enqueue(
            paths,
            collection=collection,
            show_progress=show_progress,
            include=include,
            exclude=exclude,
            new_collection=new_collection,
        )
        worked = self.work(drain=True, progress=progress, show_progress=show_progress)
        return RunReport(enqueued, worked)

    # Reading: search, a document, the batches.

    def search(
        self,
        query: str,
        *,
        mode: Mode | None = None,
        limit: int = 10,
        collections: str | Iterable[str] | None = None,
        reader: Reader | None = None,
    ) -> list[Hit]:
        """`ingest search`: one hit per document, best first, over committed generations.
        `mode`: lexical, vector or hybrid (default: hybrid, lexical with
        INGEST_EMBEDDER=none). `collections`: only these (default: every one the caller may
        read). `reader`: as an app's reader would (Reader(user_id); Reader() is anonymous).
        UnknownCollection for a named collection that does not exist, or, with `reader`, that
        the reader may not read: to it both are `no collection 'x'`, one answer."""
        with self._searching(mode, collections, reader) as (conn, embedder, names):
            return search(conn, query, mode=mode, limit=limit, embedder=embedder, collections=names, reader=reader)

    def search_passages(
        self,
        query: str,
        *,
        mode: Mode | None = None,
        limit: int = 10,
        window: int = 0,
        collections: str | Iterable[str] | None = None,
        reader: Reader | None = None,
    ) -> list[Passage]:
        """`ingest search --passages`: the best passages, best first, several of one document
        when they are the best (at most 200), each with its whole text (`content`) and, with
        `window` (0-3), the chunks on each side joined with it (`context`): what a model
        answers from. Otherwise as `search`."""
        with self._searching(mode, collections, reader) as (conn, embedder, names):
            return search_passages(
                conn, query, mode=mode, limit=limit, window=window, embedder=embedder, collections=names, reader=reader
            )

    @contextmanager
    def _searching(
        self, mode: Mode | None, collections: str | Iterable[str] | None, reader: Reader | None
    ) -> Iterator[tuple[psycopg.Connection[Any], Embedder | None, list[str] | None]]:
        """What a search runs with: a connection, the query's embedder (none for lexical mode),
        and the collections named (None: every one the caller may read), checked as `reader`."""
        names = [collections] if isinstance(collections, str) else list(collections or [])
        embedder = self._default_embedder() if mode != "lexical" else None
        if reader is not None:
            refuse_reader_in_transaction(self._opened.db)
        with self._call() as db, borrow(db) as conn:
            if reader is not None:  # checked as the reader: a private name and an absent one look alike
                require_readable(conn, names, reader)
            yield conn, embedder, names or None

    def passages(self, hits: Iterable[Hit], *, reader: Reader | None = None) -> list[str]:
        """The whole text of each hit's best chunk, in order: what a model answers from (a
        hit's snippet is a few words of it). `reader`: the one the search ran as; a chunk it
        may not read, or one gone since the search, gives the hit's snippet instead."""
        chosen = list(hits)
        if reader is not None:
            refuse_reader_in_transaction(self._opened.db)
        with self._call() as db, borrow(db) as conn:
            return hit_passages(conn, chosen, reader=reader)

    def show(self, document: str | Path | UUID, *, collection: str | None = None) -> Document:
        """`ingest show`: a document by id, source key or local path (keys are looked up in
        `collection`, default 'default'), its versions and their jobs. DocumentNotFound
        when there is none (it says when the key's document was deleted)."""
        ref = document if isinstance(document, UUID) else parse_ref(str(document))
        document_id, key = (ref, None) if isinstance(ref, UUID) else (None, ref)
        where = collection or DEFAULT_COLLECTION
        with self._call() as db:
            rpc = IngestionRpc(db)
            rpc.require_collections([collection])
            history = rpc.document_history(document_id=document_id, collection=where, source_key=key)
            if not history.ok or history.document is None:
                raise not_found(rpc, document_id, key, where)
            found = history.document.document_id
            kept, notes = rpc.kept_versions(found), rpc.document_notes(found)
        return Document(history.document, history.versions, sorted(kept), notes)

    def sections(self, document: UUID, *, reader: Reader | None = None) -> list[Section]:
        """The text of a document's indexed version, section by section, as `reader` would
        read it (readable_document_sections): none when it may not read the document, or no
        version is indexed. Without `reader`, as this connection's role (all, for an owner)."""
        if reader is not None:
            refuse_reader_in_transaction(self._opened.db)
        with self._call() as db, borrow(db) as conn:
            return readable_sections(conn, document, reader)

    def readable_collections(self, *, reader: Reader | None = None) -> list[str] | None:
        """The collections `reader` may read (public ones, and those its user is a member
        of); None: every collection (an owner's connection, without `reader`)."""
        if reader is not None:
            refuse_reader_in_transaction(self._opened.db)
        with self._call() as db, borrow(db) as conn:
            return readable_collections(conn, reader)

    def status(self, *, batch: UUID | str | None = None, limit: int = 20, collection: str | None = None) -> BatchReport:
        """`ingest status`: the latest batches (or one) with their job counts, and the
        failures with their messages; with `collection`, that collection's only."""
        batch_id = UUID(str(batch)) if batch is not None else None
        with self._call() as db:
            rpc = IngestionRpc(db)
            rpc.require_collections([collection])
            report = rpc.batch_report(batch_id=batch_id, limit=limit, collection=collection)
        if batch_id is not None and not report.batches:
            scope = f" holding documents of collection {collection!r}" if collection else ""
            raise IngestError(f"no batch {batch_id}{scope}")
        return report

    # Plumbing.

    @contextmanager
    def _call(self) -> Iterator[Database]:
        if self._closed:
            raise IngestError("this index is closed")
        with one_line_errors(), unit_of_work(self._opened.db) as db:
            yield db

    def _worker_pool(self) -> AbstractContextManager[ConnectionPool[psycopg.Connection[DictRow]]]:
        own = self._opened.own_pool
        if own is not None:
            return nullcontext(own)
        if self._closed:
            raise IngestError("this index is closed")
        return _pool_for_worker(self._opened.url, self.settings)

    def _default_embedder(self) -> Embedder:
        """INGEST_EMBEDDER's embedder, made once (a model may take a moment to load)."""
        if self._embedder is None:
            self._embedder = embedder_from_settings(self.settings)
        return self._embedder


@contextmanager
def _pool_for_worker(url: str, settings: Settings) -> Iterator[ConnectionPool[psycopg.Connection[DictRow]]]:
    with one_line_errors():
        pool = open_migrated_pool(url, settings, "ingest-python-work")
    try:
        yield pool
    finally:
        pool.close()


def _paths(paths: PathsArgument) -> list[str | Path]:
    return [paths] if isinstance(paths, (str, Path)) else list(paths)
