"""Typed client for the state-machine RPCs: one method per RPC, pydantic results.

The client is split by concern, each part in its own module with its SQL named in a file of
its own (db/sql/<part>.sql; queries.sql holds the reads that are not RPCs): leases (claim,
heartbeats, expiry), generations (begin, commit, stage log, cleanup), acks (complete, fail
or retry, one or many), batches (enqueue a document, the counters' repair path, sensor,
status and health views), documents (a source's bytes by key, a document's versions),
lifecycle (delete a document, cancel a batch, retry failed jobs), sources (registered
sources, the lease of a sync), collections (collections and their members) and metrics
(the queue's, read by `ingest metrics`). rpc/base.py holds the plumbing and the schema check
(db/schema_level.py: the two schemas the client speaks).
"""

from ingestion_pipeline.db.rpc.acks import AckRpc
from ingestion_pipeline.db.rpc.batches import BatchRpc
from ingestion_pipeline.db.rpc.collections import CollectionRpc
from ingestion_pipeline.db.rpc.documents import DocumentRpc
from ingestion_pipeline.db.rpc.leases import LeaseRpc
from ingestion_pipeline.db.rpc.lifecycle import LifecycleRpc
from ingestion_pipeline.db.rpc.metrics import MetricsRpc
from ingestion_pipeline.db.rpc.sources import SourceRpc


class IngestionRpc(LeaseRpc, AckRpc, BatchRpc, DocumentRpc, LifecycleRpc, SourceRpc, CollectionRpc, MetricsRpc):
    """Every RPC of the state machine, on a connection pool or on one connection."""


__all__ = ["IngestionRpc"]
