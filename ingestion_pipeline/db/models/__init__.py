"""Typed results of the RPCs. Every RPC returns jsonb with `ok` and, when not ok, `reason`
(a `Refusal`).

Split by concern, one module per part of the client (db/rpc/): refusals (`Refusal` and
`RpcResult`, the base of every result), batches, generations, jobs (claims, leases and
acknowledgements), items (what the bulk RPCs take), documents (versions, keys, known sources,
history), lifecycle (deletes, cancels, retries), sources (registered sync sources),
collections (collections and their members) and metrics (the queue's, for `ingest metrics`).
Every name is re-exported here (lazily): import from `ingestion_pipeline.db.models`.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingestion_pipeline.db.models.batches import (
        BatchCreated,
        BatchesRefreshed,
        BatchReport,
        BatchStatus,
        BatchSummary,
        EnqueueResult,
        FailedJob,
        IndexTotals,
        QueueHealth,
        SensorState,
    )
    from ingestion_pipeline.db.models.collections import (
        CollectionAdded,
        CollectionGranted,
        CollectionRemoved,
        CollectionRevoked,
        CollectionRole,
        CollectionSummary,
    )
    from ingestion_pipeline.db.models.documents import (
        DeletedDocument,
        DocumentHistory,
        DocumentSummary,
        DocumentVersion,
        EnqueueOutcome,
        KnownSource,
        VersionEnqueued,
        VersionJob,
    )
    from ingestion_pipeline.db.models.generations import (
        CleanupResult,
        GenerationResult,
        KeptBytesCleaned,
        SearchTermsCompacted,
    )
    from ingestion_pipeline.db.models.items import CompleteItem, FailItem, LeaseBeat, StageRow
    from ingestion_pipeline.db.models.jobs import (
        ClaimedJob,
        CommitResult,
        CompletedJobs,
        ExpireResult,
        FailedJobs,
        HeartbeatResult,
        HeartbeatsResult,
        JobOutcome,
        LeaseRef,
    )
    from ingestion_pipeline.db.models.lifecycle import (
        BatchCancelled,
        DocumentDeleted,
        JobsRetried,
        LiveDocument,
        RetryRefusal,
    )
    from ingestion_pipeline.db.models.metrics import JOB_STATUSES, QueueMetrics
    from ingestion_pipeline.db.models.refusals import Refusal, RpcResult
    from ingestion_pipeline.db.models.sources import SourceLease, SyncSource

# Each name is imported from its module when first asked for (`__getattr__`): a command that
# reads one kind of result builds only its models (pydantic builds each class at import).
_LAZY: dict[str, str] = {
    "BatchCreated": "batches",
    "BatchesRefreshed": "batches",
    "BatchReport": "batches",
    "BatchStatus": "batches",
    "BatchSummary": "batches",
    "EnqueueResult": "batches",
    "FailedJob": "batches",
    "IndexTotals": "batches",
    "QueueHealth": "batches",
    "SensorState": "batches",
    "CollectionAdded": "collections",
    "CollectionGranted": "collections",
    "CollectionRemoved": "collections",
    "CollectionRevoked": "collections",
    "CollectionRole": "collections",
    "CollectionSummary": "collections",
    "DeletedDocument": "documents",
    "DocumentHistory": "documents",
    "DocumentSummary": "documents",
    "DocumentVersion": "documents",
    "EnqueueOutcome": "documents",
    "KnownSource": "documents",
    "VersionEnqueued": "documents",
    "VersionJob": "documents",
    "CleanupResult": "generations",
    "GenerationResult": "generations",
    "KeptBytesCleaned": "generations",
    "SearchTermsCompacted": "generations",
    "CompleteItem": "items",
    "FailItem": "items",
    "LeaseBeat": "items",
    "StageRow": "items",
    "ClaimedJob": "jobs",
    "CommitResult": "jobs",
    "CompletedJobs": "jobs",
    "ExpireResult": "jobs",
    "FailedJobs": "jobs",
    "HeartbeatResult": "jobs",
    "HeartbeatsResult": "jobs",
    "JobOutcome": "jobs",
    "LeaseRef": "jobs",
    "BatchCancelled": "lifecycle",
    "DocumentDeleted": "lifecycle",
    "JobsRetried": "lifecycle",
    "LiveDocument": "lifecycle",
    "RetryRefusal": "lifecycle",
    "JOB_STATUSES": "metrics",
    "QueueMetrics": "metrics",
    "Refusal": "refusals",
    "RpcResult": "refusals",
    "SourceLease": "sources",
    "SyncSource": "sources",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "JOB_STATUSES",
    "BatchCancelled",
    "BatchCreated",
    "BatchReport",
    "BatchStatus",
    "BatchSummary",
    "BatchesRefreshed",
    "ClaimedJob",
    "CleanupResult",
    "CollectionAdded",
    "CollectionGranted",
    "CollectionRemoved",
    "CollectionRevoked",
    "CollectionRole",
    "CollectionSummary",
    "CommitResult",
    "CompleteItem",
    "CompletedJobs",
    "DeletedDocument",
    "DocumentDeleted",
    "DocumentHistory",
    "DocumentSummary",
    "DocumentVersion",
    "EnqueueOutcome",
    "EnqueueResult",
    "ExpireResult",
    "FailItem",
    "FailedJob",
    "FailedJobs",
    "GenerationResult",
    "HeartbeatResult",
    "HeartbeatsResult",
    "IndexTotals",
    "JobOutcome",
    "JobsRetried",
    "KeptBytesCleaned",
    "KnownSource",
    "LeaseBeat",
    "LeaseRef",
    "LiveDocument",
    "QueueHealth",
    "QueueMetrics",
    "Refusal",
    "RetryRefusal",
    "RpcResult",
    "SearchTermsCompacted",
    "SensorState",
    "SourceLease",
    "StageRow",
    "SyncSource",
    "VersionEnqueued",
    "VersionJob",
]
