"""Leases: claim, heartbeats (one job or all of a worker's), and dead-lettering expired ones."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ingestion_pipeline.db.fences import FenceLevel
from ingestion_pipeline.db.models import (
    ClaimedJob,
    ExpireResult,
    HeartbeatResult,
    HeartbeatsResult,
    LeaseBeat,
    LeaseRef,
)
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.base import RpcBase


class LeaseRpc(RpcBase):
    def claim(self, worker_id: str, limit: int = 1, stale_after_seconds: int | None = None) -> list[ClaimedJob]:
        """Claim up to `limit` jobs; each gets a lease of `stale_after_seconds` (the
        client's default when not given) and, on the lease-token schema, a fresh token."""
        self._reprobe_if_outdated()
        params = {
            "worker_id": worker_id,
            "limit": limit,
            "stale_after_seconds": stale_after_seconds or self.stale_after_seconds,
        }
        with self._connection() as conn:
            rows = conn.execute(query("rpc_claim"), params).fetchall()
        return [ClaimedJob.model_validate(row) for row in rows]

    # Fenced calls take the claim's `lease_token`. Without one (None) the database falls
    # back to the worker-id fence, as it does for calls of earlier releases.

    def heartbeat(
        self,
        job_id: UUID,
        worker_id: str,
        *,
        lease_token: int | None = None,
        progress: int | None = None,
        stage: str | None = None,
    ) -> HeartbeatResult:
        # Pre-hardening databases have no heartbeat: leases cannot be renewed there (R1).
        return self._fenced(
            HeartbeatResult,
            "heartbeat",
            {
                "job_id": job_id,
                "worker_id": worker_id,
                "lease_token": lease_token,
                "progress": progress,
                "stage": stage,
            },
        )

    def heartbeat_many(self, worker_id: str, leases: Sequence[LeaseBeat]) -> HeartbeatsResult:
        """Renew every lease in `leases` in one statement (each by its own token); `lost`
        names the leases (job and token) this caller no longer holds. Older schemas: one
        call per lease."""
        if not leases:
            return HeartbeatsResult(ok=True)
        if self.fence_level >= FenceLevel.BULK_ACK and all(lease.lease_token is not None for lease in leases):
            return self._result(
                HeartbeatsResult,
                "rpc_heartbeat_many",
                {
                    "job_ids": [lease.job_id for lease in leases],
                    "lease_tokens": [lease.lease_token for lease in leases],
                    "stages": [lease.stage for lease in leases],
                    "progress": [lease.progress for lease in leases],
                },
            )
        answers = [
            (
                lease,
                self.heartbeat(
                    lease.job_id, worker_id, lease_token=lease.lease_token, progress=lease.progress, stage=lease.stage
                ),
            )
            for lease in leases
        ]
        return HeartbeatsResult(
            ok=True,
            renewed=sum(answer.ok for _, answer in answers),
            lost=[
                LeaseRef(job_id=lease.job_id, lease_token=lease.lease_token)
                for lease, answer in answers
                if answer.lease_lost
            ],
            fenced=all(answer.fenced for _, answer in answers),
        )

    def expire_stale(self, stale_after_seconds: int | None = None) -> ExpireResult:
        return self._result(
            ExpireResult, "rpc_expire_stale", {"stale_after_seconds": stale_after_seconds or self.stale_after_seconds}
        )
