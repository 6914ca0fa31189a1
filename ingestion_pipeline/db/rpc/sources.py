"""Registered sources and the lease a sync holds on one (one sync of a source at a time)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from ingestion_pipeline.db.connection import execute_as_dicts
from ingestion_pipeline.db.models import RpcResult, SourceLease, SyncSource
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.base import RpcBase

SYNC_LEASE_SECONDS = 600  # renewed while the sync runs (operations/sync.py)


class SourceRpc(RpcBase):
    def register_source(
        self,
        name: str,
        url: str,
        *,
        collection: str,
        every_minutes: int | None = None,
        delete_vanished: bool = True,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> RpcResult:
        """`source_exists` when the name is taken, `invalid` (with `detail`) for a bad name.
        `include`, `exclude`: the globs that choose the files its syncs take (none: the call
        every schema since sources takes)."""
        params: dict[str, Any] = {
            "name": name,
            "url": url,
            "collection": collection,
            "every_minutes": every_minutes,
            "delete_vanished": delete_vanished,
        }
        if not include and not exclude:
            return self._result(RpcResult, "rpc_register_source", params)
        params.update(include=list(include), exclude=list(exclude))
        return self._result(RpcResult, "rpc_register_source_choosing_files", params)

    def remove_source(self, name: str) -> RpcResult:
        return self._result(RpcResult, "rpc_remove_source", {"name": name})

    def sync_sources(self) -> list[SyncSource]:
        with self._connection() as conn:
            rows = execute_as_dicts(conn, query("sync_sources")).fetchall()
        return [SyncSource.model_validate(row) for row in rows]

    def begin_source_sync(self, name: str, holder: str, lease_seconds: int = SYNC_LEASE_SECONDS) -> SourceLease:
        """The source's lease, or `not_found` / `sync_in_progress` (with its holder)."""
        params = {"name": name, "holder": holder, "lease_seconds": lease_seconds}
        return self._result(SourceLease, "rpc_begin_source_sync", params)

    def renew_source_sync(self, name: str, token: int, lease_seconds: int = SYNC_LEASE_SECONDS) -> RpcResult:
        """`lease_lost` once another sync took the source (or it was removed)."""
        params = {"name": name, "token": token, "lease_seconds": lease_seconds}
        return self._result(RpcResult, "rpc_renew_source_sync", params)

    def finish_source_sync(
        self, name: str, token: int, *, succeeded: bool, counts: dict[str, Any] | None = None, error: str | None = None
    ) -> RpcResult:
        params: dict[str, Any] = {
            "name": name,
            "token": token,
            "succeeded": succeeded,
            "counts": Jsonb(counts) if counts is not None else None,
            "error": error,
        }
        return self._result(RpcResult, "rpc_finish_source_sync", params)
