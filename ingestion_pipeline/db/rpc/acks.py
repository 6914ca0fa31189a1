"""Acknowledgements: a job completed (with its generation committed), failed or retried,
one job per call or many in one statement (bulk acknowledgement); and the operator's retry."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from ingestion_pipeline.db.models import CommitResult, CompletedJobs, CompleteItem, FailedJobs, FailItem, JobOutcome
from ingestion_pipeline.db.rpc.generations import GenerationRpc

log = logging.getLogger(__name__)

# The most items the server takes in one bulk acknowledgement (`max_ack_items()`, from
# migration …_one_lock_order.sql; more is refused with 22023): longer lists go in several calls.
MAX_ACK_ITEMS = 1000

Item = TypeVar("Item", CompleteItem, FailItem)
Answer = TypeVar("Answer", CommitResult, JobOutcome)  # a bulk answer's per-item result


class AckRpc(GenerationRpc):
    def complete(
        self,
        job_id: UUID,
        document_id: UUID,
        *,
        worker_id: str | None,
        lease_token: int | None = None,
        batch_id: UUID | None = None,
        stage: str = "indexed",
    ) -> JobOutcome:
        return self._state_call(
            JobOutcome,
            "rpc_complete",
            {
                "job_id": job_id,
                "document_id": document_id,
                "batch_id": batch_id,
                "stage": stage,
                "worker_id": worker_id,
                "lease_token": lease_token,
            },
        )

    def commit_and_complete(
        self,
        job_id: UUID,
        document_id: UUID,
        generation_id: UUID,
        *,
        worker_id: str,
        lease_token: int | None,
        metadata: dict[str, Any] | None = None,
        batch_id: UUID | None = None,
        embedder: dict[str, Any] | None = None,
    ) -> CommitResult:
        """Commit the generation and complete the job, in one transaction fenced by the
        token (`worker_id` is not sent: it names the caller for loggers). `embedder`: what
        the generation records of its embedder, sent only when given."""
        params = {
            "job_id": job_id,
            "document_id": document_id,
            "generation_id": generation_id,
            "lease_token": lease_token,
            "metadata": Jsonb(metadata or {}),
            "batch_id": batch_id,
            "stage": "indexed",
            "worker_id": worker_id,  # not sent: for loggers
        }
        if embedder is None:
            return self._state_call(CommitResult, "rpc_commit_and_complete", params)
        return self._state_call(
            CommitResult, "rpc_commit_and_complete_embedder", {**params, "embedder": Jsonb(embedder)}
        )

    def fail_or_retry(
        self,
        job_id: UUID,
        document_id: UUID,
        *,
        worker_id: str | None,
        lease_token: int | None = None,
        retry: bool = False,
        error_message: str | None = None,
        next_run_at: datetime | None = None,
        batch_id: UUID | None = None,
        document_status: str = "failed",
        stage: str = "failed",
        retry_delay_seconds: float | None = None,
    ) -> JobOutcome:
        """Fail the job, or re-queue it while attempts remain. A retry runs again after
        `retry_delay_seconds`, counted on the database server's clock (or at `next_run_at`)."""
        return self._state_call(
            JobOutcome,
            "rpc_fail_or_retry",
            {
                "job_id": job_id,
                "document_id": document_id,
                "batch_id": batch_id,
                "retry": retry,
                "document_status": document_status,
                "stage": stage,
                "error_message": error_message,
                "next_run_at": next_run_at,
                "worker_id": worker_id,
                "lease_token": lease_token,
                "retry_delay_seconds": retry_delay_seconds,
            },
        )

    def release(self, item: FailItem) -> JobOutcome:
        """A worker fault (its parsing pool broke under the job): back to pending after
        `item.retry_delay_seconds`, the claim's attempt refunded while the job has had fewer
        worker faults than attempts (`refunded`), charged like a retry past that. Fenced by
        the item's token. On the schema before `release_ingestion_job` (SQLSTATE 42883) it
        is a fenced retry, charged: what that schema can do."""
        self.require_supported_schema()
        if not self._release_missing:
            try:
                return self._result(
                    JobOutcome,
                    "rpc_release",
                    {
                        "job_id": item.job_id,
                        "document_id": item.document_id,
                        "lease_token": item.lease_token,
                        "error_message": item.error_message,
                        "retry_delay_seconds": item.retry_delay_seconds or 0.0,
                        "worker_id": item.worker_id,
                        "stages": Jsonb([row.as_json() for row in item.stages]) if item.stages else None,
                    },
                )
            except psycopg.errors.UndefinedFunction:
                self._release_missing = True
                log.warning(
                    "this database has no release_ingestion_job (run `ingest db migrate`): jobs a worker "
                    "fault interrupts are retried at the cost of an attempt"
                )
        return self.fail_or_retry_many(item.worker_id or "", [item])[0]

    # -- bulk acknowledgement ---------------------------------------------------------
    # One statement for many jobs (at most MAX_ACK_ITEMS each; longer lists go in several),
    # each item fenced by its own token, with the stage rows of its job. One answer per
    # item, in the order given. `worker_id` is not sent (each item names its own).

    @staticmethod
    def _with_stages(item: CompleteItem | FailItem, fields: dict[str, Any]) -> dict[str, Any]:
        if isinstance(item, CompleteItem) and item.embedder is not None:
            fields["embedder"] = item.embedder
        if item.stages:
            fields.update(worker_id=item.worker_id, stages=[row.as_json() for row in item.stages])
        return fields

    def complete_many(self, worker_id: str, items: Sequence[CompleteItem]) -> list[CommitResult]:
        """Complete every item's job (committing its generation first, when it has one);
        a refused item (`lease_lost`, `generation_not_owned`, ...) changes nothing."""
        if not items:
            return []
        self.require_supported_schema()
        return [result for part in _parts(items) for result in self._complete_part(part)]

    def _complete_part(self, items: Sequence[CompleteItem]) -> list[CommitResult]:
        answer = self._result(
            CompletedJobs,
            "rpc_complete_many",
            {
                "items": Jsonb(
                    [
                        self._with_stages(
                            i,
                            {
                                "job_id": str(i.job_id),
                                "document_id": str(i.document_id),
                                "lease_token": i.lease_token,
                                "generation_id": str(i.generation_id) if i.generation_id else None,
                                "metadata": i.metadata or {},
                                "stage": i.stage,
                            },
                        )
                        for i in items
                    ]
                )
            },
        )
        return _in_order(items, answer.results)

    def fail_or_retry_many(self, worker_id: str, items: Sequence[FailItem]) -> list[JobOutcome]:
        if not items:
            return []
        self.require_supported_schema()
        return [result for part in _parts(items) for result in self._fail_part(part)]

    def _fail_part(self, items: Sequence[FailItem]) -> list[JobOutcome]:
        answer = self._result(
            FailedJobs,
            "rpc_fail_or_retry_many",
            {
                "items": Jsonb(
                    [
                        self._with_stages(
                            i,
                            {
                                "job_id": str(i.job_id),
                                "document_id": str(i.document_id),
                                "lease_token": i.lease_token,
                                "retry": i.retry,
                                "error_message": i.error_message,
                                "stage": i.stage,
                                "document_status": i.document_status,
                                "retry_delay_seconds": i.retry_delay_seconds,
                            },
                        )
                        for i in items
                    ]
                )
            },
        )
        return _in_order(items, answer.results)

    def retry(self, job_id: UUID) -> JobOutcome:
        """The operator's retry of a failed job (refuses completed jobs and live leases)."""
        return self._result(JobOutcome, "rpc_retry", {"job_id": job_id})


def _parts(items: Sequence[Item]) -> list[Sequence[Item]]:
    """The items in calls of at most MAX_ACK_ITEMS, in order."""
    return [items[start : start + MAX_ACK_ITEMS] for start in range(0, len(items), MAX_ACK_ITEMS)]


def _in_order(items: Sequence[CompleteItem | FailItem], results: Sequence[Answer]) -> list[Answer]:
    """The server answers in job-id order, each answer naming its item's position: give
    them back in the caller's order (two items of one job each get their own)."""
    # An answer without a position (never sent in a bulk answer) makes the count below fail.
    by_item = {result.item: result for result in results if result.item is not None}
    if sorted(by_item) != list(range(1, len(items) + 1)):
        raise RuntimeError(f"bulk answer does not answer each of the {len(items)} items once")
    return [by_item[position] for position in range(1, len(items) + 1)]
