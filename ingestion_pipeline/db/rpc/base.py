"""Plumbing shared by the RPC client's parts: connections, result parsing, fence levels.

Fences (db/fences.py): the client learns from the catalog which generation of signatures
the database has, once, and calls that form. With lease tokens every fenced call carries
the token the claim returned; a worker-id-fenced database gets the worker-id form; a
pre-hardening one the unfenced form, each such result marked `fenced=False` and logged
once. While the database is older than the newest schema the level is looked up again at
each claim, so a running worker picks up the fences as soon as the database is migrated.

The client runs each RPC as one statement. Given a pool it borrows an autocommit
connection per call (each RPC is its own transaction); given a connection it uses that
one, so a caller may hold a transaction open around several calls (the race tests do).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db import fences
from ingestion_pipeline.db.connection import one_row
from ingestion_pipeline.db.fences import FenceLevel
from ingestion_pipeline.db.models import RpcResult
from ingestion_pipeline.db.queries import query

log = logging.getLogger(__name__)
R = TypeVar("R", bound=RpcResult)


class RpcBase:
    def __init__(
        self,
        db: psycopg.Connection[DictRow] | ConnectionPool[psycopg.Connection[DictRow]],
        stale_after_seconds: int = 300,
    ):
        self._db = db
        self.stale_after_seconds = stale_after_seconds
        self._fence_level: FenceLevel | None = None
        self._chunk_headings: bool | None = None

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[DictRow]]:
        if isinstance(self._db, ConnectionPool):
            with self._db.connection() as conn:
                yield conn
        else:
            yield self._db

    def _value(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """The jsonb an RPC returns (its one `result` column)."""
        with self._connection() as conn:
            row = conn.execute(query(name), params).fetchone()
        if row is None or row.get("result") is None:
            raise RuntimeError("RPC returned no result")
        result: dict[str, Any] = row["result"]
        return result

    def _result(self, model: type[R], name: str, params: dict[str, Any]) -> R:
        return model.model_validate(self._value(name, params))

    @property
    def fence_level(self) -> FenceLevel:
        """The database's schema generation, looked up in the catalog on first use."""
        if self._fence_level is None:
            with self._connection() as conn:
                self._fence_level = fences.probe(conn)
            if self._fence_level < FenceLevel.LEASE_TOKEN:
                log.warning(
                    "this database has %s fences, not lease tokens (schema older than the lease-token "
                    "migration)%s. Run `ingest db migrate`.",
                    self._fence_level.name.lower(),
                    "; state RPCs run unfenced" if self._fence_level is FenceLevel.NONE else "",
                )
            elif self._fence_level < fences.NEWEST:
                log.warning(
                    "this database's schema is older than this client's (%s): %s. Run `ingest db migrate`.",
                    self._fence_level.name.lower(),
                    fences.MISSING[self._fence_level],
                )
        return self._fence_level

    @property
    def chunks_have_headings(self) -> bool:
        """Whether chunks carry their title and heading path (migration weighted_search): an
        older database gets its chunks without them. Looked up once, like the fence level."""
        if self._chunk_headings is None:
            with self._connection() as conn:
                self._chunk_headings = bool(one_row(conn.execute(query("chunks_have_headings")))["present"])
        return self._chunk_headings

    def _reprobe_if_outdated(self) -> None:
        if self._fence_level is not None and self._fence_level < fences.NEWEST:
            with self._connection() as conn:
                self._fence_level = fences.probe(conn)

    def _fenced(self, model: type[R], rpc: str, params: dict[str, Any]) -> R:
        """Call `rpc` in the form this database's fence level offers; an RPC the schema
        lacks (heartbeat and stage log before the hardening) is an unfenced no-op."""
        level = self.fence_level
        name = fences.query_for(rpc, level)
        if name is None:
            return model(ok=True, fenced=False)
        result = self._result(model, name, params)
        return result if level > FenceLevel.NONE else result.model_copy(update={"fenced": False})
