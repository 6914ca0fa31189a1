"""Results of the lifecycle RPCs (db/rpc/lifecycle.py): the live documents, a document
deleted, a batch cancelled and failed jobs retried (with the refusals of those that were not)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ingestion_pipeline.db.models.batches import BatchStatus
from ingestion_pipeline.db.models.refusals import RpcResult

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
