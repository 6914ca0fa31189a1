"""Results of the job RPCs: a claimed job (db/rpc/leases.py), its lease renewed one at a
time or many in one statement, expired leases, and the acknowledgements of db/rpc/acks.py
(commit and complete, fail or retry, one or many, with the batches they moved)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ingestion_pipeline.db.models.batches import BatchStatus
from ingestion_pipeline.db.models.generations import GenerationResult
from ingestion_pipeline.db.models.refusals import RpcResult


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


class HeartbeatResult(RpcResult):
    job_id: UUID | None = None
    locked_at: datetime | None = None
    lease_expires_at: datetime | None = None


class LeaseRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: UUID
    lease_token: int | None = None


class HeartbeatsResult(RpcResult):
    """One statement renewed many leases: how many, and which ones (job and token) this
    caller lost."""

    renewed: int = 0
    lost: list[LeaseRef] = []


class ExpireResult(RpcResult):
    expired: int = 0
    job_ids: list[UUID] = []


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
    # A release (a worker fault): whether the claim's attempt was refunded, and how many
    # worker faults the job has had (None: the schema before the release RPC, a charged retry).
    refunded: bool | None = None
    worker_faults: int | None = None


class CompletedJobs(RpcResult):
    """Bulk completion: one answer per item (in the order given), the batches it moved."""

    results: list[CommitResult] = []
    batches: list[BatchStatus] = []


class FailedJobs(RpcResult):
    results: list[JobOutcome] = []
    batches: list[BatchStatus] = []
