r"""Files and folders in, one import batch out.

A file is a document of a collection keyed by where it comes from: its absolute path as a
`file:` URI (`source_key_of`). Enqueueing a key again with other bytes makes a new version
of the same document, which replaces the old one's index when it commits; the same bytes
queue nothing (docs/state-machine.md, "Versions").

Every path is checked first (exists, readable, within the size limit): one bad path
refuses the whole call and nothing is written. Each file's bytes, its version and its job
are then written in one transaction, so an upload is atomic; the batch row is written in
the transaction of the first file that gets a job, so a call that fails or is interrupted
before then, or that queues nothing (every file unchanged or already queued: a re-run of
`ingest demo`), leaves no batch behind. With `reindex=True` a file whose bytes are unchanged
gets a reindex job.

File names are stored and reported as text: bytes of a name that are not UTF-8 (a
Latin-1 name on a UTF-8 system) are shown as `\xNN` escapes (`caf\xe9.txt`), never
refused. A file is read up to the size limit plus one byte, so one that grew after the
check is refused without reading it whole.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from ingestion_pipeline.db.connection import Database, borrow
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.errors import BatchWasCancelled, IngestError
from ingestion_pipeline.operations.selection import ALL_DOCUMENTS, PassedOver, Selection
from ingestion_pipeline.operations.sources import SourceEnqueued, SourceRefused, enqueue_content

MAX_PROBLEMS_SHOWN = 5
# Outcomes that put a job in this batch; the others are `unchanged` and `already_queued`.
QUEUED = {"new", "new_version", "retried", "reindex_queued"}


class EnqueueRefused(IngestError):
    """Some paths cannot be enqueued; nothing was written."""


@dataclass(frozen=True)
class EnqueuedFile:
    path: str
    outcome: str  # new | new_version | unchanged | already_queued | retried | reindex_queued
    document_id: UUID
    job_id: UUID | None
    byte_size: int
    source_key: str
    version: int | None


@dataclass
class EnqueueReport:
    batch_id: UUID | None  # None while no file has got a job (and after a call that queued nothing)
    batch_name: str
    files: list[EnqueuedFile] = field(default_factory=list)
    # The batch's status after the enqueue (None: no batch). `completed` at once only when
    # a file's job was found queued meanwhile by another enqueue (see _enqueue_file).
    batch_status: str | None = "processing"
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) found in a folder, not read
    passed_over: PassedOver = field(default_factory=PassedOver)  # found in a folder, not documents (selection.py)

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(f.outcome for f in self.files))

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_id": str(self.batch_id) if self.batch_id else None,
            "batch_name": self.batch_name,
            "batch_status": self.batch_status,
            "counts": self.counts,
            "skipped": [{"path": path, "reason": reason} for path, reason in self.skipped],
            "skipped_by_kind": self.passed_over.by_kind(),
            "files": [
                {
                    "path": f.path,
                    "outcome": f.outcome,
                    "document_id": str(f.document_id),
                    "job_id": str(f.job_id) if f.job_id else None,
                    "byte_size": f.byte_size,
                    "source_key": f.source_key,
                    "version": f.version,
                }
                for f in self.files
            ],
        }


def collect_files(
    paths: Iterable[str | Path],
    max_bytes: int,
    skipped: list[tuple[str, str]] | None = None,
    selection: Selection = ALL_DOCUMENTS,
    passed: PassedOver | None = None,
) -> list[Path]:
    """Expand folders (recursively, skipping hidden entries) and check every file. A path
    given that is missing, not a file or unreadable refuses the call; an entry found in a
    folder that is not a regular file (a link to nothing) or not readable is passed over,
    and said in `skipped`, so one broken entry does not block a folder. Of a folder's files,
    those `selection` does not take are counted in `passed`; a file named is always taken."""
    files: list[Path] = []
    problems: list[str] = []
    passed = PassedOver() if passed is None else passed
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            problems.append(f"{display_name(path)}: no such file or folder")
        elif path.is_dir():
            found = _selected(path, walk_files(path, on_error=_folder_skipped(skipped)), selection, passed)
            files.extend(_readable(found, skipped))
        else:
            files.append(path)
    for path in files:
        problem = _problem(path, max_bytes)
        if problem:
            problems.append(problem)
    if problems:
        shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
        more = f" (and {len(problems) - MAX_PROBLEMS_SHOWN} more)" if len(problems) > MAX_PROBLEMS_SHOWN else ""
        raise EnqueueRefused(f"nothing was enqueued: {shown}{more}")
    if not files:
        what = f"no documents in the given paths (skipped: {passed})" if passed else "no files found in the given paths"
        raise EnqueueRefused(f"nothing was enqueued: {what}")
    return files


def _selected(folder: Path, found: Iterable[Path], selection: Selection, passed: PassedOver) -> Iterator[Path]:
    for path in found:
        kind = selection.passed_over(path.relative_to(folder).as_posix())
        if kind is None:
            yield path
        else:
            passed.add(kind)


def _readable(found: Iterable[Path], skipped: list[tuple[str, str]] | None) -> Iterator[Path]:
    for path in found:
        if not path.is_file():
            why = "a link to nothing" if path.is_symlink() and not path.exists() else "not a regular file"
        elif not os.access(path, os.R_OK):
            why = "not readable (permission denied)"
        else:
            yield path
            continue
        if skipped is not None:
            skipped.append((display_name(path), why))


def _folder_skipped(skipped: list[tuple[str, str]] | None) -> Callable[[OSError], None]:
    def on_error(error: OSError) -> None:
        if skipped is not None:
            skipped.append((display_name(error.filename or "?"), f"folder not listed: {error.strerror or error}"))

    return on_error


def walk_files(folder: Path, on_error: Callable[[OSError], None] | None = None) -> Iterator[Path]:
    """Every non-hidden file below `folder` (and links to files), a folder at a time, in name
    order. Symlinked folders are followed like symlinked files are, each real folder once (a
    link back up the tree is not a loop). `on_error`: os.walk's, for a folder it cannot read
    (None: passed over)."""
    seen = {folder.resolve()}
    for root, dirs, names in os.walk(folder, followlinks=True, onerror=on_error):
        kept = []
        for name in sorted(d for d in dirs if not d.startswith(".")):
            real = (Path(root) / name).resolve()
            if real not in seen:
                seen.add(real)
                kept.append(name)
        dirs[:] = kept
        yield from (Path(root) / name for name in sorted(names) if not name.startswith("."))


def _problem(path: Path, max_bytes: int) -> str | None:
    if not path.is_file():
        return f"{display_name(path)}: not a regular file"
    if not os.access(path, os.R_OK):
        return f"{display_name(path)}: not readable (permission denied)"
    size = path.stat().st_size
    if size > max_bytes:
        return f"{display_name(path)}: {_mb(size)} is over the {_mb(max_bytes)} limit (INGEST_MAX_FILE_BYTES)"
    return None


def display_name(text: str | Path) -> str:
    r"""A path or name as storable, printable text: undecodable bytes (kept by Python as
    lone surrogates) become `\xNN` escapes."""
    return os.fsencode(str(text)).decode("utf-8", "backslashreplace")


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"


def source_key_of(path: Path) -> str:
    """A local file's key: its absolute, normalized path (symlinks kept as named) as a
    `file:` URI, percent-encoded (`file:///srv/docs/a%20b.md`)."""
    return Path(os.path.abspath(path)).as_uri()


def enqueue_paths(
    db: Database,
    paths: Iterable[str | Path],
    *,
    max_bytes: int,
    batch_name: str | None = None,
    reindex: bool = False,
    max_attempts: int = 3,
    collection: str = DEFAULT_COLLECTION,
    keep_versions: int = 1,
    on_file: Callable[[EnqueuedFile], None] | None = None,
    on_files: Callable[[int], None] | None = None,
    selection: Selection = ALL_DOCUMENTS,
) -> EnqueueReport:
    """`db`: a pool, or one connection (each file is its own transaction on it, or a
    savepoint of the caller's transaction). `keep_versions` > 1: a new version's enqueue
    keeps the bytes it replaces (the janitor removes those beyond the newest `keep_versions`).
    `on_files` is told how many files were found (before the first is read), `on_file` each
    one enqueued. `selection`: which files of a folder are taken (selection.py)."""
    skipped: list[tuple[str, str]] = []
    passed = PassedOver()
    files = collect_files(paths, max_bytes, skipped, selection, passed)
    if on_files:
        on_files(len(files))
    name = batch_name or f"import {datetime.now(UTC):%Y-%m-%d %H:%M:%S}"
    batch = LazyBatch(name, {"files": len(files)})
    report = EnqueueReport(batch_id=None, batch_name=name, skipped=skipped, passed_over=passed)
    options = _Options(max_bytes, reindex, max_attempts, collection, keep_versions)
    # One connection and one client for the whole call, each file in its own transaction: a
    # checkout per file cost a health-check round trip and a client per file a schema look-up,
    # a third of an unchanged folder's re-enqueue.
    with borrow(db) as conn:
        rpc = IngestionRpc(conn)
        for path in files:
            entry = _enqueue_one(conn, rpc, path, batch, options, done=len(report.files))
            report.files.append(entry)
            report.batch_id = batch.id
            if on_file:
                on_file(entry)
    if batch.id is None:
        report.batch_status = None  # nothing was queued: no batch was written
    elif not any(f.outcome in QUEUED for f in report.files):
        # The batch was written, yet no file got a job in it (the race _enqueue_file
        # describes): no job will ever refresh it, so finish it now.
        report.batch_status = IngestionRpc(db).refresh_batch(batch.id).status
    return report


def _enqueue_one(
    conn: psycopg.Connection[Any],
    rpc: IngestionRpc,
    path: Path,
    batch: LazyBatch,
    options: _Options,
    *,
    done: int,
) -> EnqueuedFile:
    """One file, or EnqueueRefused saying what of the call (`done` files before it) stays."""
    try:
        return _enqueue_file(conn, rpc, path, batch, options)
    except (OSError, EnqueueRefused, SourceRefused, BatchWasCancelled) as exc:
        # Changed on disk after the check, or its batch was cancelled meanwhile. Files before
        # it stay enqueued (each is atomic).
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = "nothing was written"
        if done:
            held = f"in batch {batch.id}" if batch.id else "(no batch: none got a job)"
            where = f"{done} file(s) before it remain {held}"
        raise EnqueueRefused(f"{display_name(path)}: {reason}; stopped there, {where}") from None


class LazyBatch:
    """The import batch, created inside the first file's transaction."""

    def __init__(self, name: str, metadata: dict[str, Any]):
        self.name, self.metadata = name, metadata
        self.id: UUID | None = None

    def id_in(self, conn: psycopg.Connection[Any]) -> UUID:
        if self.id is None:
            created = IngestionRpc(conn).create_batch(self.name, self.metadata)
            if created.batch_id is None:
                raise RuntimeError(f"rpc_create_batch answered without a batch id ({created.reason})")
            self.id = created.batch_id
        return self.id

    @contextmanager
    def file_transaction(self, conn: psycopg.Connection[Any], *, asynchronous: bool = False) -> Iterator[None]:
        """One file's transaction on `conn` (`asynchronous`: its commit does not wait for the
        WAL flush; the caller flushes before it reports). When it wrote the batch row (`id_in`
        created it there) and fails (a refusal, Ctrl-C, the database gone), the row went with it."""
        existed = self.id is not None
        try:
            with conn.transaction():
                if asynchronous:
                    conn.execute(query("commit_asynchronously"))
                yield
        except BaseException:
            if not existed:
                self.id = None
            raise


def read_at_most(path: Path, limit: int) -> bytes:
    with path.open("rb") as source:
        return source.read(limit)


@dataclass(frozen=True)
class _Options:
    max_bytes: int
    reindex: bool
    max_attempts: int
    collection: str
    keep_versions: int


def _enqueue_file(
    conn: psycopg.Connection[Any], rpc: IngestionRpc, path: Path, batch: LazyBatch, options: _Options
) -> EnqueuedFile:
    modified_at = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    content = read_at_most(path, options.max_bytes + 1)
    if len(content) > options.max_bytes:  # it grew after the check
        raise EnqueueRefused(f"it grew over the {_mb(options.max_bytes)} limit after the check")
    source = _Source(content, display_name(path.name), source_key_of(path), modified_at)
    try:
        answer = _write(conn, rpc, source, batch, options, create_batch=False)
    except _QueuesAJob:
        # Its first write had no batch to put a job in (none was written yet, so that a
        # call that queues nothing writes none) and was rolled back: again, with the batch.
        # Should another enqueue queue this key's job in between, the file comes back
        # `already_queued` into an empty batch, which enqueue_paths finishes.
        answer = _write(conn, rpc, source, batch, options, create_batch=True)
    return EnqueuedFile(
        display_name(path), answer.outcome, answer.document_id, answer.job_id, len(content), source.key, answer.version
    )


class _QueuesAJob(Exception):
    """The file gets a job, and no batch has been written yet: roll its transaction back."""


def _refuse_a_job(outcome: str) -> None:
    if outcome in QUEUED:
        raise _QueuesAJob(outcome)


@dataclass(frozen=True)
class _Source:
    content: bytes
    name: str
    key: str
    modified_at: datetime


def _write(
    conn: psycopg.Connection[Any],
    rpc: IngestionRpc,
    source: _Source,
    batch: LazyBatch,
    options: _Options,
    *,
    create_batch: bool,
) -> SourceEnqueued:
    """One file's transaction. Before any batch exists (and unless told to create it), the
    file is enqueued with none: `unchanged` and `already_queued` need none and write no job;
    any other outcome raises _QueuesAJob before its bytes are written."""
    with batch.file_transaction(conn):
        batch_id = batch.id_in(conn) if create_batch or batch.id is not None else None
        return enqueue_content(
            conn,
            source.content,
            source_key=source.key,
            source_name=source.name,
            collection=options.collection,
            batch_id=batch_id,
            max_attempts=options.max_attempts,
            reindex=options.reindex,
            keep_versions=options.keep_versions,
            source_modified_at=source.modified_at,
            rpc=rpc,
            on_outcome=None if batch_id is not None else _refuse_a_job,
        )
