"""Which fence the database offers, learned from the catalog, and which named query each
fenced RPC uses at that level.

Six generations of the schema are in the field (docs/state-machine.md):

- NONE: before the hardening migration; no heartbeat, no stage log, state RPCs unfenced.
- WORKER_ID: fenced by the lease holder's worker id.
- LEASE_TOKEN: fenced by a per-claim token; commit and complete in one transaction.
- SERVER_RETRY_DELAY: lease tokens, and fail_or_retry takes the retry delay in seconds
  (the server computes next_run_at on its own clock).
- BULK_ACK: O(1) batch counters, and bulk acknowledgement (many jobs completed, failed or
  heartbeated in one statement, each item fenced by its own token).
- STAGES_IN_ACKS: a job's stage-log rows ride its bulk acknowledgement (written only if
  its fence holds) instead of one fenced call per stage.

The client looks the level up in the catalog (not by calling and catching SQLSTATE
42883: on a hardened database an undefined function is a bug to surface, never a reason
to drop the fence).
"""

from __future__ import annotations

from enum import IntEnum

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import one_row
from ingestion_pipeline.db.queries import query


class FenceLevel(IntEnum):
    NONE = 0
    WORKER_ID = 1
    LEASE_TOKEN = 2
    SERVER_RETRY_DELAY = 3
    BULK_ACK = 4
    STAGES_IN_ACKS = 5


NEWEST = FenceLevel.STAGES_IN_ACKS

# What a client at NEWEST does differently on an older (lease-token) schema, for its warning.
MISSING = {
    FenceLevel.LEASE_TOKEN: "retry delays are computed on this machine's clock, and jobs are acknowledged "
    "one call each",
    FenceLevel.SERVER_RETRY_DELAY: "jobs are acknowledged one call each (no bulk acknowledgement), and each "
    "completion counts its whole batch",
    FenceLevel.BULK_ACK: "each stage-log row is written by a call of its own",
}

# RPC -> named query per level; None: the RPC does not exist at that level (a no-op).
# A level not listed uses the highest listed level below it (`query_for`).
QUERIES: dict[str, dict[FenceLevel, str | None]] = {
    "heartbeat": {
        FenceLevel.LEASE_TOKEN: "rpc_heartbeat",
        FenceLevel.WORKER_ID: "rpc_heartbeat_worker_id",
        FenceLevel.NONE: None,
    },
    "record_stage": {
        FenceLevel.LEASE_TOKEN: "rpc_record_stage",
        FenceLevel.WORKER_ID: "rpc_record_stage_worker_id",
        FenceLevel.NONE: None,
    },
    "begin_generation": {
        FenceLevel.LEASE_TOKEN: "rpc_begin_generation",
        FenceLevel.WORKER_ID: "rpc_begin_generation_worker_id",
        FenceLevel.NONE: "rpc_begin_generation_worker_id",
    },
    "commit_generation": {
        FenceLevel.LEASE_TOKEN: "rpc_commit_generation",
        FenceLevel.WORKER_ID: "rpc_commit_generation_worker_id",
        FenceLevel.NONE: "rpc_commit_generation_legacy",
    },
    "complete": {
        FenceLevel.LEASE_TOKEN: "rpc_complete",
        FenceLevel.WORKER_ID: "rpc_complete_worker_id",
        FenceLevel.NONE: "rpc_complete_legacy",
    },
    "fail_or_retry": {
        FenceLevel.SERVER_RETRY_DELAY: "rpc_fail_or_retry",
        FenceLevel.LEASE_TOKEN: "rpc_fail_or_retry_lease_token",
        FenceLevel.WORKER_ID: "rpc_fail_or_retry_worker_id",
        FenceLevel.NONE: "rpc_fail_or_retry_legacy",
    },
}


def query_for(rpc: str, level: FenceLevel) -> str | None:
    """The named query for `rpc` at `level`: the form of the highest listed level not above it."""
    forms = QUERIES[rpc]
    return forms[max(known for known in forms if known <= level)]


def probe(conn: psycopg.Connection[DictRow]) -> FenceLevel:
    """The fence level of the database `conn` is connected to (one catalog look-up)."""
    return FenceLevel(one_row(conn.execute(query("rpc_fence_level")))["level"])
