"""One sync of a source (a folder or a bucket prefix) into a collection: new files are
enqueued, changed ones become new versions, vanished ones are deleted, unchanged ones cost a
listing entry and no read.

A file is unchanged when the live document of its key has, at its latest version, the same
size and the same modification time (or ETag): its bytes are not read. Otherwise they are
read and hashed: the latest version's bytes under a new time are `unchanged` too (nothing is
enqueued, even when that version failed: a failed version stays failed until its file
changes), and the time is recorded so the next sync reads nothing. Other bytes are enqueued
(operations/sources.py). A file is hashed from the bytes actually read, with the time the
listing saw before the read, so one that changed while it was read is read again by the next
sync. An entry the listing cannot read (a link to nothing, a file or folder it may not read:
listing.Unlisted) fails alone, and its documents, and those under it, are kept.

A cancel of the sync's import batch (`ingest cancel`) stops it at the next file
(BatchWasCancelled), before any delete. A file whose latest version's build was cancelled
(that batch's, or any) and that is unchanged since is `requeued` by the next sync: a job for
its stored bytes, nothing read (a version that failed is not: the same bytes would fail
again). An enqueue that answers `retried` (another writer's bytes met a cancelled build) is
counted `retried`. Deletes come last and only from a listing that reached every folder it
could: a source that cannot be listed (ListingFailed) raises before anything is deleted, and
an empty listing deletes nothing unless `allow_empty` (an unmounted share or a wrong prefix
looks empty). Each enqueue and each delete is its own transaction, so an interrupted sync
leaves whole files done and the next sync finishes the rest.

A delete carries the version the sync read as the document's latest (`delete_vanished_
document`): under the document's lock, a document with another version (enqueued after the
listing, by anyone) is not deleted. A registered source's sync (SyncFence) also carries its
lease, renewed and checked in each delete's transaction: once another sync took the source or
it was removed (`ingest source remove` waits for a delete in flight), the next delete is
refused and the sync stops (SyncLeaseLost). On the previous release's schema the deletes are
that release's (`delete_document`, the lease checked every 30 s).

A file's transaction commits asynchronously (`synchronous_commit = off` for it alone: the
first sync of 100,000 files would otherwise wait for 100,000 WAL flushes), and the listing
phase ends with one commit that waits for the flush of all of them, before the sync deletes
or reports anything. A crash of the server can lose only files of a sync that has not
reported (at most the last ~0.6 s of its commits): that sync fails, and the next one finds
those files new or changed again. A job claimed meanwhile is safe too: the claim's own
commit waits for the flush, which covers the enqueue before it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db.connection import Database, borrow
from ingestion_pipeline.db.models import KnownSource
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import LiveKey
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.enqueue import LazyBatch
from ingestion_pipeline.operations.listing import Entry, Source, Unlisted, open_source
from ingestion_pipeline.operations.selection import ALL_DOCUMENTS, PassedOver, Selection
from ingestion_pipeline.operations.sources import SourceRefused, enqueue_content

PAGE = 500  # listing entries looked up per query, live keys read per page
COUNTED = ("new", "changed", "unchanged", "requeued", "retried", "deleted", "failed")


class SyncLeaseLost(IngestError):
    """Another sync took the source while this one ran, or it was removed: it stopped,
    deleting nothing more."""


@dataclass(frozen=True)
class SyncFence:
    """The lease of a registered source's sync: every delete is checked against it."""

    source: str
    token: int


@dataclass
class SyncReport:
    source: str
    collection: str
    dry_run: bool
    batch_id: UUID | None = None
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (key, reason)
    changes: list[tuple[str, str]] = field(default_factory=list)  # (key, new|changed|requeued|deleted)
    deletes_skipped: str | None = None  # why nothing was deleted, when deletes were due
    bytes_read: int = 0
    passed_over: PassedOver = field(default_factory=PassedOver)  # not documents, or not selected: not synced

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "collection": self.collection,
            "dry_run": self.dry_run,
            "batch_id": str(self.batch_id) if self.batch_id else None,
            "counts": {name: self.counts[name] for name in COUNTED},
            "bytes_read": self.bytes_read,
            "deletes_skipped": self.deletes_skipped,
            "skipped_by_kind": self.passed_over.by_kind(),
            "failures": [{"source_key": key, "reason": reason} for key, reason in self.failures],
            "changes": [{"source_key": key, "change": change} for key, change in self.changes],
        }


@dataclass(frozen=True)
class SyncOptions:
    collection: str
    max_bytes: int
    delete: bool = True
    dry_run: bool = False
    allow_empty: bool = False
    max_attempts: int = 3
    keep_versions: int = 1
    selection: Selection = ALL_DOCUMENTS  # files it passes over are not the source's (selection.py)


Pool = ConnectionPool[psycopg.Connection[DictRow]]


def sync_source(
    db: Database,
    url: str,
    options: SyncOptions,
    *,
    on_entry: Callable[[str, Counter[str]], None] | None = None,
    keep_lease: Callable[[bool], None] | None = None,
    fence: SyncFence | None = None,
) -> SyncReport:
    """One pass over `url` (ListingFailed when it cannot be listed: nothing deleted), on a
    pool or one connection (`db`). `keep_lease`, when the sync holds its source's lease, is
    called at every file and delete (it may renew) and before the deletes
    (`keep_lease(True)`: it must); it raises when the lease was lost. `fence`: that lease,
    checked by the server in each delete."""
    source = open_source(url)
    report = SyncReport(source=url, collection=options.collection, dry_run=options.dry_run)
    batch = LazyBatch(f"sync {url} {datetime.now(UTC):%Y-%m-%d %H:%M:%S}", {"sync": url})
    listed = _Listed()
    # One connection for the whole pass, a transaction per file: no pool checkout and no
    # schema look-up per file (a first sync enqueues every file of the source).
    with borrow(db) as conn:
        writer = _Writer(conn, IngestionRpc(conn), batch)
        began = writer.rpc.database_now()  # documents enqueued from now on are not this pass's to delete
        try:
            for page in _pages(_listed_entries(source, listed, report, options.selection)):
                known = writer.rpc.known_sources(options.collection, [entry.key for entry in page])
                for entry in page:
                    if keep_lease:  # renews when its interval has passed (a page may take long)
                        keep_lease(False)
                    _sync_entry(writer, entry, known.get(entry.key), options, report)
                    if on_entry:  # told each entry's key and the pass's counts so far
                        on_entry(entry.key, report.counts)
        finally:
            report.batch_id = batch.id
            _finish_batch(writer.rpc, report)
        if report.batch_id is not None:  # only a pass that committed a file has commits to flush
            _flush(conn)
        if keep_lease and options.delete:
            keep_lease(True)
        _delete_vanished(writer.rpc, source, listed, began, options, report, _Deleter(keep_lease, fence))
    return report


@dataclass
class _Listed:
    """What the listing held: the keys of its files, and the keys of the entries it could not
    read (each covers the keys under it too). Neither is deleted."""

    keys: set[str] = field(default_factory=set)
    unlisted: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.keys or self.unlisted)

    def holds(self, key: str) -> bool:
        return key in self.keys or any(key == top or key.startswith(top.rstrip("/") + "/") for top in self.unlisted)


def _listed_entries(source: Source, listed: _Listed, report: SyncReport, selection: Selection) -> Iterator[Entry]:
    """The source's entries; an Unlisted one is reported and kept from the deletes, and one
    the selection passes over is counted and not listed (its document, if any, is deleted)."""
    for entry in source.entries():
        if isinstance(entry, Unlisted):
            listed.unlisted.append(entry.key)
            _failed(report, entry.key, entry.reason)
        elif (kind := selection.passed_over(entry.relative or entry.name)) is not None:
            report.passed_over.add(kind)
        else:
            listed.keys.add(entry.key)
            yield entry


def _pages(entries: Iterator[Entry]) -> Iterator[list[Entry]]:
    page: list[Entry] = []
    for entry in entries:
        page.append(entry)
        if len(page) == PAGE:
            yield page
            page = []
    if page:
        yield page


def _unchanged(entry: Entry, known: KnownSource) -> bool:
    if known.byte_size != entry.size:
        return False
    if entry.etag is not None and known.source_etag is not None:
        return entry.etag == known.source_etag
    return entry.modified_at is not None and entry.modified_at == known.source_modified_at


@dataclass(frozen=True)
class _Writer:
    conn: psycopg.Connection[Any]
    rpc: IngestionRpc  # on `conn`
    batch: LazyBatch


def _sync_entry(
    writer: _Writer, entry: Entry, known: KnownSource | None, options: SyncOptions, report: SyncReport
) -> None:
    if known is not None and _unchanged(entry, known):
        if known.build_cancelled:
            _requeue(writer, entry.key, known, options, report)
        else:
            report.counts["unchanged"] += 1
        return
    if entry.size > options.max_bytes:
        _failed(report, entry.key, f"{entry.size} bytes is over the {options.max_bytes} limit (INGEST_MAX_FILE_BYTES)")
        return
    if options.dry_run:  # what it would do, from the listing alone (a changed time may hold the same bytes)
        _counted(report, entry.key, "new" if known is None else "changed")
        return
    try:
        content = entry.read(options.max_bytes + 1)
    except OSError as exc:  # unreadable, or gone since it was listed
        _failed(report, entry.key, exc.strerror or str(exc))
        return
    report.bytes_read += len(content)
    if len(content) > options.max_bytes:
        _failed(report, entry.key, f"it grew over the {options.max_bytes}-byte limit after it was listed")
        return
    if known is not None and hashlib.sha256(content).hexdigest() == known.content_sha256:
        # Touched, not changed: nothing to queue (a failed version stays failed until its file changes).
        _touched(writer, known.document_id, known.content_sha256, entry, report)
        return
    _enqueue(writer, entry, content, options, report)


def _enqueue(writer: _Writer, entry: Entry, content: bytes, options: SyncOptions, report: SyncReport) -> None:
    batch, conn = writer.batch, writer.conn
    try:
        with batch.file_transaction(conn, asynchronous=True):
            done = enqueue_content(
                conn,
                content,
                source_key=entry.key,
                source_name=entry.name,
                collection=options.collection,
                batch_id=batch.id_in(conn),
                max_attempts=options.max_attempts,
                keep_versions=options.keep_versions,
                source_modified_at=entry.modified_at,
                source_etag=entry.etag,
                rpc=writer.rpc,
            )
    except SourceRefused as exc:
        _failed(report, entry.key, str(exc))
        return
    if done.outcome == "new":
        _counted(report, entry.key, "new")
    elif done.outcome == "new_version":
        _counted(report, entry.key, "changed")
    elif done.outcome == "retried":  # its latest version had these bytes and no build: queued again
        _counted(report, entry.key, "retried")
    else:  # the same bytes under a new time
        _touched(writer, done.document_id, done.content_sha256, entry, report)


def _touched(writer: _Writer, document_id: UUID, content_sha256: str, entry: Entry, report: SyncReport) -> None:
    """The file's bytes are its latest version's under a new time: remember the time, so the
    next sync reads nothing."""
    writer.rpc.touch_version_source(document_id, content_sha256, entry.modified_at, entry.etag)
    report.counts["unchanged"] += 1


def _requeue(writer: _Writer, key: str, known: KnownSource, options: SyncOptions, report: SyncReport) -> None:
    """A job for the latest version's stored bytes, whose build was cancelled."""
    if options.dry_run:
        _counted(report, key, "requeued")
        return
    batch, conn = writer.batch, writer.conn
    with batch.file_transaction(conn, asynchronous=True):
        result = writer.rpc.enqueue(known.document_id, batch_id=batch.id_in(conn), max_attempts=options.max_attempts)
    if result.ok:
        _counted(report, key, "requeued")
    else:  # queued meanwhile by someone else, or deleted (the next sync finds it new)
        report.counts["unchanged"] += 1


@dataclass
class _Deleter:
    keep_lease: Callable[[bool], None] | None
    fence: SyncFence | None
    fenced_rpc: bool = True  # False on the previous release's schema (no delete_vanished_document)


def _delete_vanished(
    rpc: IngestionRpc,
    source: Source,
    listed: _Listed,
    began: datetime,
    options: SyncOptions,
    report: SyncReport,
    deleter: _Deleter,
) -> None:
    if not options.delete:
        return
    vanished = list(_vanished(rpc, source, listed, began, options.collection))
    if not vanished:
        return
    if not listed and not options.allow_empty:
        report.deletes_skipped = (
            f"the listing is empty: {len(vanished)} document(s) of the source kept (--allow-empty deletes them)"
        )
        return
    for live in vanished:
        if deleter.keep_lease:
            deleter.keep_lease(False)
        if options.dry_run:
            _counted(report, live.source_key, "deleted")
            continue
        _delete_one(rpc, live, report, deleter)


def _delete_one(rpc: IngestionRpc, live: LiveKey, report: SyncReport, deleter: _Deleter) -> None:
    """Delete `live` if it still has the version the listing saw (and, fenced, the lease holds)."""
    fence = deleter.fence
    result = None
    if deleter.fenced_rpc:
        result = rpc.delete_vanished(
            live.document_id, live.version, source=fence.source if fence else None, token=fence.token if fence else None
        )
        deleter.fenced_rpc = result is not None
    if result is None:
        result = rpc.delete_document(live.document_id)
    if result.ok:
        _counted(report, live.source_key, "deleted")
    elif result.reason == "lease_lost" and fence is not None:
        raise SyncLeaseLost(
            f"source {fence.source!r} was taken by another sync or removed: this one stopped where it was, deleting "
            "nothing more"
        )
    elif result.reason not in ("already_deleted", "version_changed"):  # (enqueued again: the next pass judges it)
        _failed(report, live.source_key, f"not deleted: {result.reason}")


def _vanished(
    rpc: IngestionRpc, source: Source, listed: _Listed, began: datetime, collection: str
) -> Iterator[LiveKey]:
    """The live documents under the source's prefix, enqueued before the pass began, that the
    listing did not hold."""
    after = ""
    while True:
        page = rpc.live_keys_under(collection, source.prefix, before=began, after=after, limit=PAGE)
        if not page:
            return
        yield from (live for live in page if not listed.holds(live.source_key))
        after = page[-1].source_key


def _flush(conn: psycopg.Connection[Any]) -> None:
    """Wait until every file's commit, asynchronous ones included, is on disk."""
    with conn.transaction():
        conn.execute(query("flush_commits"))


def _finish_batch(rpc: IngestionRpc, report: SyncReport) -> None:
    """A batch in which nothing was queued would never be finished by a job."""
    if report.batch_id is not None and not (
        report.counts["new"] or report.counts["changed"] or report.counts["requeued"] or report.counts["retried"]
    ):
        rpc.refresh_batch(report.batch_id)


def _counted(report: SyncReport, key: str, change: str) -> None:
    report.counts[change] += 1
    report.changes.append((key, change))


def _failed(report: SyncReport, key: str, reason: str) -> None:
    report.counts["failed"] += 1
    report.failures.append((key, reason))
