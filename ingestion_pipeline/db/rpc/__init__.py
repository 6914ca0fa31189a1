"""Typed client for the state-machine RPCs: one method per RPC, pydantic results.

The client is split by concern, each part in its own module with its SQL named in a file of
its own (db/sql/<part>.sql; queries.sql holds the reads that are not RPCs): leases (claim,
heartbeats, expiry), generations (begin, commit, stage log, cleanup), acks (complete, fail
or retry, one or many), batches (enqueue a document, the counters' repair path, sensor,
status and health views), documents (a source's bytes by key, a document's versions),
lifecycle (delete a document, cancel a batch, retry failed jobs), sources (registered
sources, the lease of a sync), collections (collections and their members) and metrics
(the queue's, read by `ingest metrics`). rpc/base.py holds the plumbing and the schema check
(db/schema_level.py: the two schemas the client speaks). `IngestionRpc` (rpc/client.py) is
imported from here when first asked for: importing one part (`search` reads collections) does
not import the others, nor their models.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingestion_pipeline.db.rpc.client import IngestionRpc


def __getattr__(name: str) -> object:
    if name != "IngestionRpc":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(f"{__name__}.client").IngestionRpc
    globals()[name] = value
    return value


__all__ = ["IngestionRpc"]
