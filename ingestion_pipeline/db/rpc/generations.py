"""Index generations: begin, commit, the stage log, and the guarded cleanup of abandoned ones."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from ingestion_pipeline.db.models import (
    CleanupResult,
    GenerationResult,
    KeptBytesCleaned,
    RpcResult,
    SearchTermsCompacted,
)
from ingestion_pipeline.db.rpc.base import RpcBase


class GenerationRpc(RpcBase):
    def begin_generation(
        self, job_id: UUID, document_id: UUID, worker_id: str, *, lease_token: int | None = None
    ) -> GenerationResult:
        return self._state_call(
            GenerationResult,
            "rpc_begin_generation",
            {"job_id": job_id, "document_id": document_id, "worker_id": worker_id, "lease_token": lease_token},
        )

    def commit_generation(
        self,
        job_id: UUID,
        document_id: UUID,
        generation_id: UUID,
        worker_id: str | None,
        metadata: dict[str, Any] | None = None,
        *,
        lease_token: int | None = None,
        embedder: dict[str, Any] | None = None,
    ) -> GenerationResult:
        """`embedder`: what the generation records of the embedder that made its vectors
        (EmbedderRecord.as_json); sent only when given (the previous release's schema has no
        such parameter)."""
        params = {
            "job_id": job_id,
            "document_id": document_id,
            "generation_id": generation_id,
            "worker_id": worker_id,
            "metadata": Jsonb(metadata or {}),
            "lease_token": lease_token,
        }
        if embedder is None:
            return self._state_call(GenerationResult, "rpc_commit_generation", params)
        return self._state_call(
            GenerationResult, "rpc_commit_generation_embedder", {**params, "embedder": Jsonb(embedder)}
        )

    def record_stage(
        self,
        job_id: UUID,
        worker_id: str,
        stage: str,
        *,
        started_at: datetime,
        finished_at: datetime,
        detail: dict[str, Any] | None = None,
        lease_token: int | None = None,
    ) -> RpcResult:
        """Append to the stage log, only while the caller holds the lease. (The worker's own
        stage rows ride its acknowledgements instead.)"""
        return self._state_call(
            RpcResult,
            "rpc_record_stage",
            {
                "job_id": job_id,
                "worker_id": worker_id,
                "stage": stage,
                "started_at": started_at,
                "finished_at": finished_at,
                "detail": Jsonb(detail or {}),
                "lease_token": lease_token,
            },
        )

    def cleanup_generations(
        self, *, document_id: UUID | None = None, limit: int = 100, dry_run: bool = True
    ) -> CleanupResult:
        return self._result(
            CleanupResult, "rpc_cleanup", {"document_id": document_id, "limit": limit, "dry_run": dry_run}
        )

    def cleanup_kept_bytes(self, *, keep_versions: int = 1, limit: int = 100, dry_run: bool = True) -> KeptBytesCleaned:
        """Older versions' kept bytes beyond the newest `keep_versions`, and those of deleted
        documents: at most `limit` versions."""
        return self._result(
            KeptBytesCleaned,
            "rpc_cleanup_kept_bytes",
            {"keep_versions": keep_versions, "limit": limit, "dry_run": dry_run},
        )

    def compact_search_terms(self, *, limit: int = 10_000) -> SearchTermsCompacted:
        """Fold the delta rows of up to `limit` lexemes of the search term counts into one row
        each (…_bm25_search.sql). On the previous release's schema, which has no counts: nothing."""
        if not self._value("rpc_has_search_term_counts", {})["present"]:
            return SearchTermsCompacted(ok=True)
        return self._result(SearchTermsCompacted, "rpc_compact_search_terms", {"limit": limit})
