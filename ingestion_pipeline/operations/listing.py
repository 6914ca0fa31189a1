"""What a source holds, listed without reading a byte: each file's key, size, and
modification time or ETag, so a sync can tell unchanged files from the listing alone.

A source is a local folder (a path, or a `file://` URL) or a URL fsspec understands
(`s3://bucket/prefix` through s3fs, `gs://…`, `az://…` where their filesystems are
installed). Keys are the ones `ingest enqueue` gives: a local file's absolute path as a
`file:` URI, an object's URL. The listing streams, a folder at a time, and a listing that
fails anywhere raises ListingFailed: a sync deletes only from a complete listing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, NoReturn
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


@dataclass(frozen=True)
class Source:
    url: str  # as the user gave it, for messages
    prefix: str  # every key of the source starts with it
    entries: Callable[[], Iterator[Entry]]


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


def _local_entries(root: Path) -> Iterator[Entry]:
    """Every non-hidden file below `root`, as `ingest enqueue` walks a folder (symlinked
    folders followed, each real folder once); a folder that cannot be read fails the listing."""

    def refuse(error: OSError) -> NoReturn:
        raise ListingFailed(f"listing {display_name(error.filename or root)} failed: {error.strerror or error}")

    for path in walk_files(root, on_error=refuse):
        try:
            stat = path.stat()
        except OSError as exc:
            # A file removed since its folder was read is not part of the source now; a
            # broken link (to an unmounted share, say) may hide a whole folder: its
            # documents must not look deleted, so the listing fails.
            if isinstance(exc, FileNotFoundError) and not path.is_symlink():
                continue
            refuse(exc)
        if not path.is_file():
            continue
        yield Entry(
            key=source_key_of(path),
            name=display_name(path.name),
            size=stat.st_size,
            modified_at=datetime.fromtimestamp(stat.st_mtime, UTC),
            etag=None,
            read=partial(read_at_most, path),
        )


def _fs_entries(fs: Any, protocol: str, root: str, url: str) -> Iterator[Entry]:
    try:
        if not fs.isdir(root):
            # An object store has no empty folders: a prefix with nothing under it, in a
            # bucket that exists, is an empty listing (which deletes nothing unless asked).
            if "/" in root and fs.exists(root.split("/", 1)[0]) and not fs.isfile(root):
                return
            raise ListingFailed(f"{url}: no such folder or prefix")
        for info in _walk(fs, root):
            path = info["name"]
            yield Entry(
                key=f"{protocol}://{path}",
                name=path.rsplit("/", 1)[-1],
                size=int(info.get("size") or 0),
                modified_at=_modified_at(info),
                etag=_etag(info),
                read=_fs_reader(fs, path),
            )
    except ListingFailed:
        raise
    except Exception as exc:  # noqa: BLE001  (each filesystem raises its own: HTTP errors, permissions, timeouts)
        raise ListingFailed(f"listing {url} failed: {first_line(exc)}") from None


def _walk(fs: Any, root: str) -> Iterator[dict[str, Any]]:
    """Every file below `root`, a folder (one listing) at a time. Not fs.walk: fsspec's
    asynchronous walk (s3fs, gcsfs, adlfs) does not pass `on_error="raise"` down to
    subfolders (fsspec 2026.9), so a subfolder it may not list would look empty, and a sync
    would delete its documents. Here every listing's error is raised."""
    folders = [root]
    while folders:
        folder = folders.pop()
        listing = sorted(fs.ls(folder, detail=True, refresh=True), key=lambda info: info["name"])
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
