"""What a transaction has read so far, per table: the current transaction's counters of
pg_stat_xact_user_tables (rows read by sequential scans, heap rows fetched through indexes).
Read as a role that may see them (the owner): take a snapshot, run the call, subtract (since
PostgreSQL 15 the pending counts may hold the connection's earlier transactions' too)."""

from __future__ import annotations

import psycopg

COUNTERS = """
select relname, seq_tup_read + idx_tup_fetch as rows, seq_scan
  from pg_stat_xact_user_tables
 where schemaname = 'public'
"""


def rows_read(conn: psycopg.Connection, since: dict[str, int] | None = None) -> dict[str, int]:
    """Rows read per table in this transaction (minus `since`, a snapshot taken earlier in it);
    tables with none left out. A sequential scan counts as a row too, so one over an empty
    table still shows."""
    now = {row["relname"]: row["rows"] + row["seq_scan"] for row in conn.execute(COUNTERS)}
    before = since or {}
    return {name: count - before.get(name, 0) for name, count in now.items() if count - before.get(name, 0)}
