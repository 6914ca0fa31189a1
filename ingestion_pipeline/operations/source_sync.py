"""A sync of a registered source: under the source's lease, so two syncs of one source never
interleave (the second is refused with the first one's holder), and its outcome recorded on
the source (`ingest source list`, Dagster's metadata). The lease is checked at every file,
renewed every RENEW_EVERY_SECONDS and once more before the deletes, and each delete carries it
(SyncFence: the server renews and checks it in the delete's transaction): a sync that lost it
(stalled past its lease while another sync took the source, or its source removed) stops
there, before its next delete."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable

from ingestion_pipeline.db.models import SyncSource
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError, first_line
from ingestion_pipeline.operations.selection import Selection
from ingestion_pipeline.operations.sync import (
    COUNTED,
    Pool,
    SyncFence,
    SyncLeaseLost,
    SyncOptions,
    SyncReport,
    sync_source,
)

RENEW_EVERY_SECONDS = 30.0
log = logging.getLogger(__name__)


class SyncRefused(IngestError):
    """The source is unknown, or another sync holds it (nothing was done)."""


def sync_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def find_source(rpc: IngestionRpc, name: str) -> SyncSource:
    for source in rpc.sync_sources():
        if source.name == name:
            return source
    raise SyncRefused(f"no registered source {name!r} (ingest source list)")


__all__ = ["SyncLeaseLost", "SyncRefused", "find_source", "sync_holder", "sync_registered"]


def sync_registered(
    pool: Pool,
    name: str,
    *,
    max_bytes: int,
    max_attempts: int = 3,
    keep_versions: int = 1,
    dry_run: bool = False,
    holder: str | None = None,
    on_entry: Callable[[str, Counter[str]], None] | None = None,
) -> SyncReport:
    """One sync of the registered source `name`. A dry run reads and writes nothing, so it
    takes no lease and records nothing."""
    rpc = IngestionRpc(pool)
    if dry_run:
        source = find_source(rpc, name)
        selection = Selection.of(source.include_globs, source.exclude_globs)
        options = SyncOptions(
            source.collection, max_bytes, source.delete_vanished, True, False, max_attempts, selection=selection
        )
        return sync_source(pool, source.url, options, on_entry=on_entry)
    lease = rpc.begin_source_sync(name, holder or sync_holder())
    if not lease.ok or lease.token is None or lease.url is None or lease.collection is None:
        if lease.reason == "sync_in_progress":
            raise SyncRefused(
                f"source {name!r} is being synced by {lease.holder} (its lease runs to {lease.expires_at})"
            )
        raise SyncRefused(f"no registered source {name!r} (ingest source list)")
    token = lease.token
    options = SyncOptions(
        collection=lease.collection,
        max_bytes=max_bytes,
        delete=lease.delete_vanished,
        max_attempts=max_attempts,
        keep_versions=keep_versions,
        selection=Selection.of(lease.include, lease.exclude),  # its files, as registered
    )
    try:
        keep = _keeper(rpc, name, token)
        report = sync_source(pool, lease.url, options, on_entry=on_entry, keep_lease=keep, fence=SyncFence(name, token))
    except BaseException as exc:
        try:
            rpc.finish_source_sync(name, token, succeeded=False, error=first_line(exc))
        except Exception:
            log.warning("could not record the failed sync of %s", name, exc_info=True)
        raise
    counts = {change: report.counts[change] for change in COUNTED}
    if report.passed_over:  # shown by `ingest source list` beside the others
        counts["skipped"] = report.passed_over.total
    rpc.finish_source_sync(name, token, succeeded=True, counts=counts)
    return report


def _keeper(rpc: IngestionRpc, name: str, token: int) -> Callable[[bool], None]:
    """Renews the lease when RENEW_EVERY_SECONDS have passed, and always before deletes."""
    renewed = time.monotonic()

    def keep(before_deletes: bool) -> None:
        nonlocal renewed
        if not before_deletes and time.monotonic() - renewed < RENEW_EVERY_SECONDS:
            return
        if not rpc.renew_source_sync(name, token).ok:
            raise SyncLeaseLost(
                f"source {name!r} was taken by another sync or removed: this one stopped where it was, deleting "
                "nothing more"
            )
        renewed = time.monotonic()

    return keep
