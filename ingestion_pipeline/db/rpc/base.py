"""Plumbing shared by the RPC client's parts: connections, result parsing, the schema check.

The schema (db/schema_level.py): before its first claim or fenced call the client looks up,
once, which schema the database has. This release's and the previous release's are spoken
(every fenced call carries the token the claim returned); an older one is refused with
SchemaTooOld, never called in a form without the fence.

The client runs each RPC as one statement. Given a pool it borrows a connection per call
(each RPC is its own transaction); given a connection it uses that one, so a caller may hold
a transaction open around several calls (the race tests do). Rows are read as dicts on a
cursor of their own (connection.execute_as_dicts): the connection's row factory is the
caller's, tuples for a plain psycopg.connect().
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

from ingestion_pipeline.db import schema_level
from ingestion_pipeline.db.chunk_table import ChunkTable, chunk_table
from ingestion_pipeline.db.connection import Database, borrow, execute_as_dicts
from ingestion_pipeline.db.models import RpcResult
from ingestion_pipeline.db.queries import query

log = logging.getLogger(__name__)
R = TypeVar("R", bound=RpcResult)


class RpcBase:
    def __init__(self, db: Database, stale_after_seconds: int = 300):
        self._db = db
        self.stale_after_seconds = stale_after_seconds
        self._schema_level: schema_level.SchemaLevel | None = None
        self._chunk_table: ChunkTable | None = None
        # Set once `release_ingestion_job` was found missing (the previous release's schema).
        self._release_missing = False

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        with borrow(self._db) as conn:
            yield conn

    def _value(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """The jsonb an RPC returns (its one `result` column)."""
        with self._connection() as conn:
            row = execute_as_dicts(conn, query(name), params).fetchone()
        if row is None or row.get("result") is None:
            raise RuntimeError("RPC returned no result")
        result: dict[str, Any] = row["result"]
        return result

    def _result(self, model: type[R], name: str, params: dict[str, Any]) -> R:
        return model.model_validate(self._value(name, params))

    @property
    def schema_level(self) -> schema_level.SchemaLevel:
        """The database's schema level, looked up in the catalog on first use; SchemaTooOld
        when it is older than the previous release's."""
        if self._schema_level is None:
            with self._connection() as conn:
                self._schema_level = schema_level.probe(conn)
            if self._schema_level < schema_level.CURRENT:
                log.warning(
                    "this database has the previous release's schema (%s); this client works with it, "
                    "but run `ingest db migrate` before the next upgrade.",
                    self._schema_level.name.lower(),
                )
        return self._schema_level

    def require_supported_schema(self) -> None:
        """Raise SchemaTooOld unless the database's schema is in the support window."""
        _ = self.schema_level

    @property
    def chunk_table(self) -> ChunkTable:
        """What the database's chunks take (db/chunk_table.py). Looked up once, like the
        schema level."""
        if self._chunk_table is None:
            with self._connection() as conn:
                self._chunk_table = chunk_table(conn)
        return self._chunk_table

    def _state_call(self, model: type[R], name: str, params: dict[str, Any]) -> R:
        """A state-machine call (`name`: its named query), after the schema check."""
        self.require_supported_schema()
        return self._result(model, name, params)
