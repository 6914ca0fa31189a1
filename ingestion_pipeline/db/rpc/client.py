"""`IngestionRpc`: every part of the client in one class (re-exported by db/rpc/__init__.py)."""

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
