"""The index statements of no-transaction migrations: which ones run without the
migrator's lock_timeout (`CREATE/DROP INDEX CONCURRENTLY`, `REINDEX … CONCURRENTLY`), and
whether the index a `CREATE INDEX` statement names exists and is valid (db/migrate.py drops an
INVALID leftover of a failed build, and records a file only when its indexes are valid)."""

from __future__ import annotations

import re

import psycopg
from psycopg.rows import DictRow

from ingestion_pipeline.db.queries import query

# CREATE/DROP INDEX CONCURRENTLY and REINDEX ... CONCURRENTLY take SHARE UPDATE EXCLUSIVE,
# which never blocks the queue's writers, and then wait for older transactions; the short
# lock_timeout (meant for locks that queue writers behind the migrator) would abort those
# waits and leave an INVALID index. The lock_timeout is set only inside transactional files.
CONCURRENT_INDEX = re.compile(
    r"^\s*(create\s+(unique\s+)?index|drop\s+index|reindex\s+(\(.*?\)\s*)?\w+)\s+"
    r"concurrently\b",
    re.IGNORECASE | re.DOTALL,
)
CREATE_INDEX = re.compile(
    r"^\s*create\s+(?:unique\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?"
    r"(?P<index>\"[^\"]+\"|[\w$]+)\s+on\s+(?:only\s+)?(?P<table>(?:(?:\"[^\"]+\"|[\w$]+)\.)?(?:\"[^\"]+\"|[\w$]+))",
    re.IGNORECASE | re.DOTALL,
)


def _code(statement: str) -> str:
    """The statement without its leading comment lines."""
    lines = statement.splitlines()
    while lines and (not lines[0].strip() or lines[0].strip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines)


def _index_validity(conn: psycopg.Connection[DictRow], statement: str) -> tuple[str, str, bool] | None:
    """(schema, index name, indisvalid) for a CREATE INDEX statement whose index exists."""
    match = CREATE_INDEX.match(_code(statement))
    if not match:
        return None
    index = match["index"][1:-1] if match["index"].startswith('"') else match["index"].lower()
    row = conn.execute(query("index_validity"), {"index": index, "table": match["table"]}).fetchone()
    return None if row is None else (row["schema"], index, row["valid"])
