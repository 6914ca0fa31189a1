"""Leases: claim, heartbeats (one job or all of a worker's), and dead-lettering expired ones."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ingestion_pipeline.db.connection import execute_as_dicts
from ingestion_pipeline.db.models import ClaimedJob, ExpireResult, HeartbeatResult, HeartbeatsResult, LeaseBeat
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.base import RpcBase


class LeaseRpc(RpcBase):
    def claim(self, worker_id: str, limit: int = 1, stale_after_seconds: int | None = None) -> list[ClaimedJob]:
        """Claim up to `limit` jobs; each gets a lease of `stale_after_seconds` (the
        client's default when not given) and a fresh token that fences its later calls."""
        self.require_supported_schema()
        params = {
            "worker_id": worker_id,
            "limit": limit,
            "stale_after_seconds": stale_after_seconds or self.stale_after_seconds,
        }
        with self._connection() as conn:
            rows = execute_as_dicts(conn, query("rpc_claim"), params).fetchall()
        return [ClaimedJob.model_validate(row) for row in rows]

    # Fenced calls take the claim's `lease_token`. (The database still honours the worker-id
    # fence of the releases before tokens, for their workers during an upgrade.)

    def heartbeat(
        self,
        job_id: UUID,
        worker_id: str,
        *,
        lease_token: int | None = None,
        progress: int | None = None,
        stage: str | None = None,
    ) -> HeartbeatResult:
        return self._state_call(
            HeartbeatResult,
            "rpc_heartbeat",
            {
                "job_id": job_id,
                "worker_id": worker_id,
                "lease_token": lease_token,
                "progress": progress,
                "stage": stage,
            },
        )

    def heartbeat_many(self, worker_id: str, leases: Sequence[LeaseBeat]) -> HeartbeatsResult:
        """Renew every lease in `leases` in one statement, each by its own token; `lost`
        names the leases (job and token) this caller no longer holds. `worker_id` is not
        sent (the tokens are the fence); the tests' clients of older schemas use it."""
        if not leases:
            return HeartbeatsResult(ok=True)
        return self._state_call(
            HeartbeatsResult,
            "rpc_heartbeat_many",
            {
                "job_ids": [lease.job_id for lease in leases],
                "lease_tokens": [lease.lease_token for lease in leases],
                "stages": [lease.stage for lease in leases],
                "progress": [lease.progress for lease in leases],
            },
        )

    def expire_stale(self, stale_after_seconds: int | None = None) -> ExpireResult:
        return self._state_call(
            ExpireResult, "rpc_expire_stale", {"stale_after_seconds": stale_after_seconds or self.stale_after_seconds}
        )
