"""Which schema the database has, learned from the catalog, within the support window.

The client speaks two schemas: this release's and the previous release's. That is the
rolling-upgrade window (docs/operations.md, "Upgrading"): the database is migrated first,
workers are redeployed after, so for a while a new client may meet a database that a
deployment has not migrated yet, and an old worker a migrated one (the migrations keep the
previous release's calls working). Anything older is refused before the first state-machine
call (SchemaTooOld), never spoken to in a form that drops a fence.

The worker's calls (claim, heartbeats, acknowledgements) are the same at both levels, so a
worker of this release drains the previous release's schema (and says once that it is
behind). Enqueueing by key and reading a document's versions need this release's schema
(`require_current`). Each release moves the window: its own level is added and the oldest
one removed.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import psycopg

from ingestion_pipeline.db.connection import execute_as_dicts, one_row
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.errors import SchemaTooOld


class SchemaLevel(IntEnum):
    # The previous release: stage rows ride the acknowledgement (…_stage_rows_in_acks.sql),
    # and cancelled batches take no files (…_cancelled_batches_take_no_files.sql).
    STAGES_IN_ACKS = 5
    # This release: one lock order for every state change (…_one_lock_order.sql), and
    # documents keyed by their source, with versions (…_document_versions.sql).
    DOCUMENT_VERSIONS = 6


CURRENT = SchemaLevel.DOCUMENT_VERSIONS
OLDEST_SUPPORTED = SchemaLevel.STAGES_IN_ACKS
OLDEST_MIGRATION = "20261201000500_stage_rows_in_acks"


def probe(conn: psycopg.Connection[Any]) -> SchemaLevel:
    """The schema level of the database `conn` is connected to (one catalog look-up);
    SchemaTooOld below the window."""
    level = int(one_row(execute_as_dicts(conn, query("rpc_schema_level")))["level"])
    if level < OLDEST_SUPPORTED:
        raise SchemaTooOld(
            f"this database's schema is older than this release supports (migration {OLDEST_MIGRATION} "
            "is not applied): the client speaks this release's schema and the previous release's only. "
            "Run `ingest db migrate`."
        )
    return SchemaLevel(level)


def require_current(level: SchemaLevel, what: str) -> None:
    """SchemaTooOld unless `level` is this release's: `what` needs its schema."""
    if level < CURRENT:
        raise SchemaTooOld(
            f"{what} needs this release's schema (migration 20261202000200_document_versions is not applied). "
            "Run `ingest db migrate`."
        )
