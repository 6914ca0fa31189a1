"""What a source holds, listed without reading a byte: each file's key, size, and
modification time or ETag, so a sync can tell unchanged files from the listing alone.

A source is a local folder (a path, or a `file://` URL) or a URL fsspec understands
(`s3://bucket/prefix` through s3fs, `gs://…`, `az://…` where their filesystems are
installed). Keys are the ones `ingest enqueue` gives: a local file's absolute path as a
`file:` URI, an object's URL. The listing streams, a folder at a time. A source that cannot
be reached or listed at its top raises ListingFailed (one line: the sync deletes nothing). An
entry below it that cannot be listed (a link to nothing, a file or a folder it may not read)
is an Unlisted: reported, and every key at or under it is kept by the sync's deletes, as if
listed: a broken link to a share may hide a whole folder of documents.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

import fsspec

from ingestion_pipeline.errors import IngestError, first_line
from ingestion_pipeline.operations.enqueue import display_name, read_at_most, source_key_of, walk_files


class ListingFailed(IngestError):
    """The source could not be listed whole: nothing may be deleted on its account."""


@dataclass(frozen=True)
class Entry:
    key: str  # the document's source key
    name: str  # the file's base name, as stored and shown
    size: int
    modified_at: datetime | None
    etag: str | None
    read: Callable[[int], bytes]  # at most n bytes of the file
    relative: str = ""  # its path below the source, `/`-separated (what a selection's globs match)


@dataclass(frozen=True)
class Unlisted:
    """An entry the listing could not read: its key (a file's, or a folder's: every key
    under it is covered too) and why."""

    key: str
    reason: str


@dataclass(frozen=True)
class Source:
    url: str  # as the user gave it, for messages
    prefix: str  # every key of the source starts with it
    entries: Callable[[], Iterator[Entry | Unlisted]]


def open_source(url: str) -> Source:
    """The source `url` names; ListingFailed when it does not exist or is not a folder."""
    local = _local_path(url)
    if local is not None:
        if not local.is_dir():
            raise ListingFailed(f"{display_name(url)}: no such folder")
        root = Path(os.path.abspath(local))
        return Source(url, source_key_of(root).rstrip("/") + "/", lambda: _local_entries(root))
    try:
        fs, path = fsspec.url_to_fs(url, use_listings_cache=False, skip_instance_cache=True)
    except (ImportError, ValueError) as exc:  # an unknown protocol, or its package missing
        raise ListingFailed(f"{url}: {exc}") from None
    except Exception as exc:  # noqa: BLE001  (some filesystems connect here: ftp refused, an unknown host)
        raise ListingFailed(f"{url}: {first_line(exc) or type(exc).__name__}") from None
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    root = path.rstrip("/")
    return Source(url, f"{protocol}://{root}/", lambda: _fs_entries(fs, protocol, root, url))


def _local_path(url: str) -> Path | None:
    """The folder a path or a `file:`/`local:` URL names (None: another filesystem's URL).
    Percent-escapes are undone to bytes, as `source_key_of` made them from the path's bytes."""
    parts = urlsplit(url)
    if parts.scheme in ("file", "local"):
        if parts.netloc not in ("", "localhost"):
            raise ListingFailed(f"{url}: a file URL names a local folder (file:///path), not a host")
        return Path(os.fsdecode(unquote_to_bytes(parts.path)))
    if "://" in url:
        return None
    return Path(url)


def _local_entries(root: Path) -> Iterator[Entry | Unlisted]:
    """Every non-hidden file below `root`, as `ingest enqueue` walks a folder (symlinked
    folders followed, each real folder once). `root` unreadable fails the listing; a folder
    below it, or a file, that cannot be read is Unlisted."""
    unlisted: list[Unlisted] = []

    def folder_failed(error: OSError) -> None:
        folder = Path(os.path.abspath(error.filename or root))
        if folder == root:
            raise ListingFailed(f"listing {display_name(root)} failed: {error.strerror or error}")
        unlisted.append(Unlisted(source_key_of(folder), f"folder not listed: {error.strerror or error}"))

    for path in walk_files(root, on_error=folder_failed):
        yield from unlisted
        unlisted.clear()
        try:
            stat = path.stat()
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not path.is_symlink():
                continue  # removed since its folder was read: not part of the source now
            yield Unlisted(source_key_of(path), unlisted_reason(path, exc))
            continue
        if not path.is_file():
            continue
        yield Entry(
            key=source_key_of(path),
            name=display_name(path.name),
            size=stat.st_size,
            modified_at=datetime.fromtimestamp(stat.st_mtime, UTC),
            etag=None,
            read=partial(read_at_most, path),
            relative=display_name(path.relative_to(root).as_posix()),
        )
    yield from unlisted


def unlisted_reason(path: Path, error: OSError) -> str:
    """Why a listed name cannot be read, in a few words."""
    if isinstance(error, FileNotFoundError) and path.is_symlink():
        return f"a link to nothing ({display_name(os.readlink(path))})"
    return error.strerror or str(error)


def _fs_entries(fs: Any, protocol: str, root: str, url: str) -> Iterator[Entry | Unlisted]:
    try:
        if not fs.isdir(root):
            # An object store has no empty folders: a prefix with nothing under it, in a
            # bucket that exists, is an empty listing (which deletes nothing unless asked).
            if "/" in root and fs.exists(root.split("/", 1)[0]) and not fs.isfile(root):
                return
            raise ListingFailed(f"{url}: no such folder or prefix")
        for info in _walk(fs, root):
            path = info["name"]
            if "unlisted" in info:
                yield Unlisted(f"{protocol}://{path}", info["unlisted"])
                continue
            yield Entry(
                key=f"{protocol}://{path}",
                name=path.rsplit("/", 1)[-1],
                size=int(info.get("size") or 0),
                modified_at=_modified_at(info),
                etag=_etag(info),
                read=_fs_reader(fs, path),
                relative=path[len(root) :].lstrip("/"),
            )
    except ListingFailed:
        raise
    except Exception as exc:  # noqa: BLE001  (each filesystem raises its own: HTTP errors, permissions, timeouts)
        raise ListingFailed(f"listing {url} failed: {first_line(exc)}") from None


def _walk(fs: Any, root: str) -> Iterator[dict[str, Any]]:
    """Every file below `root`, a folder (one listing) at a time. Not fs.walk: fsspec's
    asynchronous walk (s3fs, gcsfs, adlfs) does not pass `on_error="raise"` down to
    subfolders (fsspec 2026.9), so a subfolder it may not list would look empty, and a sync
    would delete its documents. Here the top folder's error is raised, and a subfolder's is
    answered as {"name": folder, "unlisted": why}, which keeps its documents."""
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            listing = sorted(fs.ls(folder, detail=True, refresh=True), key=lambda info: info["name"])
        except Exception as exc:  # (each filesystem raises its own)
            if folder == root:
                raise
            yield {"name": folder, "unlisted": f"folder not listed: {first_line(exc)}"}
            continue
        for info in listing:
            name = info["name"].rstrip("/")
            if info.get("type") == "directory":
                if name != folder:
                    folders.append(name)
            elif name != folder:  # (listing a file's path answers the file itself)
                yield {**info, "name": name}


def _modified_at(info: dict[str, Any]) -> datetime | None:
    for field in ("LastModified", "mtime", "last_modified", "updated"):
        value = info.get(field)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(value, UTC)
    return None


def _etag(info: dict[str, Any]) -> str | None:
    value = info.get("ETag") or info.get("etag") or info.get("md5Hash")
    return str(value).strip('"') if value else None


def _fs_reader(fs: Any, path: str) -> Callable[[int], bytes]:
    def read(limit: int) -> bytes:
        try:
            with fs.open(path, "rb") as source:
                data: bytes = source.read(limit)
                return data
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001  (a backend's own errors: timeouts, HTTP): this file fails alone
            raise OSError(first_line(exc)) from None

    return read
