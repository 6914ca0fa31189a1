"""Registered sync sources (db/rpc/sources.py): a source with the state of its last sync,
and the lease a sync holds on its source while it runs."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from ingestion_pipeline.db.models.refusals import RpcResult

# -- registered sources and their syncs (db/rpc/sources.py) -------------------------------


class SyncSource(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    url: str
    collection: str
    every_minutes: int | None = None
    delete_vanished: bool = True
    include_globs: list[str] = []  # which files its syncs take (operations/selection.py)
    exclude_globs: list[str] = []
    created_at: datetime
    syncing: bool = False  # a sync holds its lease now
    sync_holder: str | None = None
    sync_expires_at: datetime | None = None
    last_started_at: datetime | None = None
    last_finished_at: datetime | None = None
    last_status: str | None = None  # succeeded | failed
    last_counts: dict[str, int] | None = None
    last_error: str | None = None
    due: bool = False  # its interval has passed since its last sync began


class SourceLease(RpcResult):
    """A sync's hold on its source (begin_source_sync), or why it was refused."""

    name: str | None = None
    token: int | None = None
    url: str | None = None
    collection: str | None = None
    delete_vanished: bool = True
    include: list[str] = []  # the source's globs (none before …_source_selection.sql)
    exclude: list[str] = []
    holder: str | None = None  # sync_in_progress: who holds it
    expires_at: datetime | None = None
