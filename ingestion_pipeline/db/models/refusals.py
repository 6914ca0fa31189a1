"""The refusals and the shared base of every RPC result: `Refusal` (the `reason` an RPC
answers with when it changed nothing) and `RpcResult` (the `ok` and `reason` every RPC's jsonb
carries; the other results of this package extend it)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Refusal(StrEnum):
    """Why an RPC (or an item of a bulk one) changed nothing: the `reason` the migrations'
    plpgsql answers with (tests/unit/test_refusals.py checks the list against schema.sql)."""

    LEASE_LOST = "lease_lost"  # the caller's lease (token) is no longer the job's
    LEASE_LIVE = "lease_live"  # a retry of a job that is being worked on
    NOT_FOUND = "not_found"
    NOT_OPEN = "not_open"  # the job is not pending or processing
    COMPLETED = "completed"  # a retry of a completed job
    CANCELLED = "cancelled"  # a retry of a cancelled job
    ALREADY_QUEUED = "already_queued"  # the document has an open job already
    ALREADY_DELETED = "already_deleted"
    DOCUMENT_DELETED = "document_deleted"
    DOCUMENT_NOT_FOUND = "document_not_found"
    DOCUMENT_MISMATCH = "document_mismatch"  # the job is not that document's
    BATCH_NOT_FOUND = "batch_not_found"
    BATCH_CANCELLED = "batch_cancelled"
    NOTHING_OPEN = "nothing_open"  # a cancel with no open job (schemas before …_one_lock_order.sql)
    GENERATION_NOT_FOUND = "generation_not_found"
    GENERATION_NOT_OWNED = "generation_not_owned"  # begun by another claim
    GENERATION_NOT_BUILDING = "generation_not_building"  # committed or abandoned already
    DUPLICATE_ITEM = "duplicate_item"  # a bulk call named one job twice
    VERSION_SUPERSEDED = "version_superseded"  # a build of a version that is no longer the latest
    VERSION_CHANGED = "version_changed"  # a sync's delete of a document that has another version since its listing
    SUPERSEDED = "superseded"  # a retry of a job whose version a newer one replaced
    CONTENDED = "contended"  # another transaction holds the row; try again
    SOURCE_EXISTS = "source_exists"  # a registered source of that name exists
    INVALID = "invalid"  # a source's name, URL, collection or interval breaks its checks
    SYNC_IN_PROGRESS = "sync_in_progress"  # another sync holds the source's lease
    UNKNOWN_COLLECTION = "unknown_collection"  # a grant on a collection that does not exist
    HAS_SOURCES = "has_sources"  # a collection's removal: a registered source syncs into it
    NOT_EMPTY = "not_empty"  # a collection's removal: it has live documents


class RpcResult(BaseModel):
    # RPCs may add keys over time; unknown keys are kept, not rejected.
    model_config = ConfigDict(extra="allow", frozen=True)

    ok: bool
    # A reason a newer schema added is kept as its text (a client of the previous release
    # reads the database of the next one).
    reason: Refusal | str | None = Field(default=None, union_mode="left_to_right")
    # False only from the tests' client of schemas before the fences (tests/any_schema_rpc.py).
    fenced: bool = True

    @property
    def lease_lost(self) -> bool:
        return not self.ok and self.reason == Refusal.LEASE_LOST
