"""Which schema the database has, learned from the catalog, within the support window.

The client speaks two schemas: this release's and the previous release's. That is the
rolling-upgrade window (docs/operations.md, "Upgrading"): the database is migrated first,
workers are redeployed after, so for a while a new client may meet a database that a
deployment has not migrated yet, and an old worker a migrated one (the migrations keep the
previous release's calls working). Anything older is refused before the first state-machine
call (SchemaTooOld), never spoken to in a form that drops a fence.

Both levels take the same calls today; the level is kept so that the next release that
changes a call has one place to branch, and so a worker says once that its database is
behind. Each release moves the window: its own level is added and the oldest one removed.
"""

from __future__ import annotations

from enum import IntEnum

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.connection import one_row
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.errors import SchemaTooOld


class SchemaLevel(IntEnum):
    # The previous release: stage rows ride the acknowledgement (…_stage_rows_in_acks.sql),
    # and cancelled batches take no files (…_cancelled_batches_take_no_files.sql).
    STAGES_IN_ACKS = 5
    # This release: one lock order for every state change (…_one_lock_order.sql).
    ONE_LOCK_ORDER = 6


CURRENT = SchemaLevel.ONE_LOCK_ORDER
OLDEST_SUPPORTED = SchemaLevel.STAGES_IN_ACKS
OLDEST_MIGRATION = "20261201000500_stage_rows_in_acks"


def probe(conn: psycopg.Connection[DictRow]) -> SchemaLevel:
    """The schema level of the database `conn` is connected to (one catalog look-up);
    SchemaTooOld below the window."""
    level = int(one_row(conn.execute(query("rpc_schema_level")))["level"])
    if level < OLDEST_SUPPORTED:
        raise SchemaTooOld(
            f"this database's schema is older than this release supports (migration {OLDEST_MIGRATION} "
            "is not applied): the client speaks this release's schema and the previous release's only. "
            "Run `ingest db migrate`."
        )
    return SchemaLevel(level)
