"""Typed results of the RPCs. Every RPC returns jsonb with `ok` and, when not ok, `reason`
(a `Refusal`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal
from uuid import UUID

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
    SUPERSEDED = "superseded"  # a retry of a job whose version a newer one replaced
    CONTENDED = "contended"  # another transaction holds the row; try again
    SOURCE_EXISTS = "source_exists"  # a registered source of that name exists
    INVALID = "invalid"  # a source's name, URL, collection or interval breaks its checks
    SYNC_IN_PROGRESS = "sync_in_progress"  # another sync holds the source's lease


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


class BatchCreated(RpcResult):
    batch_id: UUID | None = None


class BatchStatus(RpcResult):
    batch_id: UUID | None = None
    status: Literal["pending", "processing", "completed", "completed_with_errors", "cancelled"] | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    open: int = 0


class EnqueueResult(RpcResult):
    job_id: UUID | None = None


class GenerationResult(RpcResult):
    generation_id: UUID | None = None
    page_count: int | None = None
    section_count: int | None = None
    chunk_count: int | None = None


class CommitResult(GenerationResult):
    """Commit and complete: the generation's counts and the job's outcome."""

    job_id: UUID | None = None
    # In a bulk answer: the item's position in the call (1-based) and its token.
    item: int | None = None
    lease_token: int | None = None
    # On schemas without the one-transaction RPC: True when the commit went through
    # although the completion may not have.
    committed: bool | None = None


class JobOutcome(RpcResult):
    job_id: UUID | None = None
    item: int | None = None  # in a bulk answer: the item's position in the call (1-based)
    lease_token: int | None = None
    retried: bool | None = None
    attempts_exhausted: bool | None = None


class HeartbeatResult(RpcResult):
    job_id: UUID | None = None
    locked_at: datetime | None = None
    lease_expires_at: datetime | None = None


class ExpireResult(RpcResult):
    expired: int = 0
    job_ids: list[UUID] = []


class CleanupResult(RpcResult):
    dry_run: bool
    documents: int = 0
    pages: int = 0
    sections: int = 0
    chunks: int = 0
    generations: int = 0
    sources: int = 0  # bytes of deleted documents (lifecycle schema)


class KeptBytesCleaned(RpcResult):
    """Older versions' kept bytes removed (or, in a dry run, owed): how many versions, how
    many bytes as stored."""

    dry_run: bool
    keep_versions: int
    versions: int = 0
    bytes: int = 0


class SensorState(RpcResult):
    claimable: int = 0
    pending_later: int = 0
    processing: int = 0
    stuck_batch_ids: list[UUID] = []


class BatchesRefreshed(RpcResult):
    """Batches recounted by the repair path (stuck, or counters drifted)."""

    refreshed: int = 0
    batches: list[BatchStatus] = []


class LeaseRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: UUID
    lease_token: int | None = None


class HeartbeatsResult(RpcResult):
    """One statement renewed many leases: how many, and which ones (job and token) this
    caller lost."""

    renewed: int = 0
    lost: list[LeaseRef] = []


class CompletedJobs(RpcResult):
    """Bulk completion: one answer per item (in the order given), the batches it moved."""

    results: list[CommitResult] = []
    batches: list[BatchStatus] = []


class FailedJobs(RpcResult):
    results: list[JobOutcome] = []
    batches: list[BatchStatus] = []


class BatchSummary(BaseModel):
    """One batch in `ingest status`: its stored counters and its jobs counted by status."""

    model_config = ConfigDict(extra="allow", frozen=True)

    batch_id: UUID
    name: str
    status: str
    total_files: int = 0
    jobs: int = 0  # its jobs counted (of one collection, with `ingest status --collection`)
    pending: int = 0
    processing: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    oldest_pending_age_seconds: int | None = None


class FailedJob(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    job_id: UUID
    batch_id: UUID | None = None
    document_id: UUID
    source_name: str
    collection: str | None = None
    source_key: str | None = None
    version: int | None = None
    attempt_count: int
    max_attempts: int
    stage: str | None = None
    error_message: str | None = None
    failed_at: datetime | None = None


class BatchReport(RpcResult):
    """`ingest status`: batches with their job counts, and recent failures."""

    batches: list[BatchSummary] = []
    failures: list[FailedJob] = []


class QueueHealth(RpcResult):
    jobs_by_status: dict[str, int] = {}
    oldest_pending_age_seconds: int | None = None
    stale_leases: int = 0
    stuck_batches: int = 0
    count_mismatches: int = 0
    indexed_without_generation: int = 0
    generations_awaiting_cleanup: int = 0
    batch_counter_drift: int = 0


class ClaimedJob(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: UUID
    document_id: UUID
    batch_id: UUID | None
    kind: Literal["index", "reindex"]
    attempt_count: int
    max_attempts: int
    locked_by: str
    locked_at: datetime
    source_name: str
    mime_type: str | None
    content_sha256: str
    byte_size: int
    committed_generation_id: UUID | None
    # The fencing token of this claim and the lease deadline (None on schemas before
    # lease tokens, where the worker id is the fence).
    lease_token: int | None = None
    lease_expires_at: datetime | None = None
    # Where the document comes from and the version this job builds (None for documents
    # enqueued before keys, and on schemas before …_document_versions.sql).
    collection: str | None = None
    source_key: str | None = None
    document_version: int | None = None


# -- items of the bulk RPCs ---------------------------------------------------------------


@dataclass(frozen=True)
class LeaseBeat:
    """One lease to renew, with the stage and progress to show for its job."""

    job_id: UUID
    lease_token: int | None
    stage: str | None = None
    progress: int | None = None


@dataclass(frozen=True)
class StageRow:
    """One row of a job's stage log, sent with the job's acknowledgement."""

    stage: str
    started_at: datetime
    finished_at: datetime
    detail: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class CompleteItem:
    """Complete a job; with a generation, commit it in the same transaction first.
    `stages`: its stage-log rows, written only if the completion is accepted."""

    job_id: UUID
    document_id: UUID
    lease_token: int | None
    generation_id: UUID | None = None
    metadata: dict[str, Any] | None = None
    batch_id: UUID | None = None
    stage: str = "indexed"
    worker_id: str | None = None
    stages: tuple[StageRow, ...] = ()


@dataclass(frozen=True)
class FailItem:
    """Fail a job, or re-queue it after `retry_delay_seconds` while attempts remain."""

    job_id: UUID
    document_id: UUID
    lease_token: int | None
    retry: bool = False
    error_message: str | None = None
    stage: str = "failed"
    document_status: str = "failed"
    retry_delay_seconds: float | None = None
    batch_id: UUID | None = None
    worker_id: str | None = None
    stages: tuple[StageRow, ...] = ()


# -- documents by key, and their versions (db/rpc/batches.py, db/rpc/lifecycle.py) -------------


EnqueueOutcome = Literal["new", "new_version", "unchanged", "already_queued", "retried", "reindex_queued"]


class VersionEnqueued(RpcResult):
    """What the enqueue of a source's bytes under its key did (enqueue_document_version)."""

    outcome: EnqueueOutcome | None = None
    document_id: UUID | None = None
    version: int | None = None
    job_id: UUID | None = None
    superseded_job_id: UUID | None = None  # the older version's open job, cancelled
    adopted: bool = False  # a document from before keys took this key as its version 1
    store_bytes: bool = False  # the caller writes the bytes in the same transaction


class VersionJob(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    job_id: UUID
    kind: str
    status: str
    stage: str
    attempt_count: int
    batch_id: UUID | None = None
    error_message: str | None = None
    created_at: datetime
    completed_at: datetime | None = None


class DocumentVersion(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    version: int
    content_sha256: str
    byte_size: int
    mime_type: str | None = None
    source_name: str
    source_modified_at: datetime | None = None
    source_etag: str | None = None
    enqueued_at: datetime
    # indexed | replaced | building | queued | failed | superseded | cancelled (None: no job)
    outcome: str | None = None
    error_message: str | None = None
    jobs: list[VersionJob] = []


class DocumentSummary(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    document_id: UUID
    collection: str
    source_key: str | None = None
    source_name: str
    title: str | None = None
    status: str
    version: int | None = None
    indexed_version: int | None = None
    byte_size: int
    chunk_count: int = 0
    created_at: datetime
    deleted_at: datetime | None = None


class KnownSource(BaseModel):
    """What a live document's latest version was enqueued from (a sync compares its listing
    with it), and whether that version's build was cancelled (the sync queues it again)."""

    model_config = ConfigDict(frozen=True)

    source_key: str
    document_id: UUID
    version: int
    byte_size: int
    source_modified_at: datetime | None = None
    source_etag: str | None = None
    build_cancelled: bool = False  # not indexed, nothing open, its last job cancelled: queue it again


class DocumentHistory(RpcResult):
    """`ingest show`: a document and its versions, newest first."""

    document: DocumentSummary | None = None
    versions: list[DocumentVersion] = []


# -- lifecycle: delete, cancel, retry (db/rpc/lifecycle.py) -------------------------------


class LiveDocument(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    collection: str = "default"
    source_key: str | None = None
    source_name: str
    status: str
    batch_id: UUID | None = None
    created_at: datetime


class DocumentDeleted(RpcResult):
    """`purged`: its rows and bytes went in the same transaction (nothing was in flight);
    otherwise the guarded cleanup removes them once the building worker's calls are refused."""

    document_id: UUID | None = None
    source_name: str | None = None
    cancelled_job_id: UUID | None = None
    in_flight: bool = False
    purged: bool = False
    deleted_at: datetime | None = None  # when already deleted
    batch: BatchStatus | None = None


class BatchCancelled(RpcResult):
    batch_id: UUID | None = None
    cancelled: int = 0
    in_flight: int = 0
    job_ids: list[UUID] = []
    status: str | None = None  # the batch's status after the call
    # True when no job was open: the batch is marked cancelled all the same (from migration
    # …_one_lock_order.sql; earlier schemas refuse with reason `nothing_open`).
    nothing_open: bool = False
    batch: BatchStatus | None = None


class RetryRefusal(BaseModel):
    job_id: UUID
    reason: str


class JobsRetried(RpcResult):
    retried: int = 0
    job_ids: list[UUID] = []
    refused: list[RetryRefusal] = []


# -- registered sources and their syncs (db/rpc/sources.py) -------------------------------


class SyncSource(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    url: str
    collection: str
    every_minutes: int | None = None
    delete_vanished: bool = True
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
    holder: str | None = None  # sync_in_progress: who holds it
    expires_at: datetime | None = None
