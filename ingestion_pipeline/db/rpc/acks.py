"""Acknowledgements: a job completed (with its generation committed), failed or retried,
one job per call or many in one statement (bulk acknowledgement); and the operator's retry."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from psycopg.types.json import Jsonb

from ingestion_pipeline.db.fences import FenceLevel
from ingestion_pipeline.db.models import CommitResult, CompletedJobs, CompleteItem, FailedJobs, FailItem, JobOutcome
from ingestion_pipeline.db.rpc.generations import GenerationRpc

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
        return self._fenced(
            JobOutcome,
            "complete",
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
    ) -> CommitResult:
        """Commit the generation and complete the job. With a token on a lease-token
        schema that is one transaction; older schemas (or no token) get the two calls of
        earlier releases, and `committed` says whether the first one went through."""
        if self.fence_level >= FenceLevel.LEASE_TOKEN and lease_token is not None:
            return self._result(
                CommitResult,
                "rpc_commit_and_complete",
                {
                    "job_id": job_id,
                    "document_id": document_id,
                    "generation_id": generation_id,
                    "lease_token": lease_token,
                    "metadata": Jsonb(metadata or {}),
                    "batch_id": batch_id,
                    "stage": "indexed",
                    "worker_id": worker_id,
                },
            )  # worker_id: not sent, kept for loggers
        committed = self.commit_generation(
            job_id, document_id, generation_id, worker_id, metadata, lease_token=lease_token
        )
        if not committed.ok:
            return CommitResult.model_validate(committed.model_dump())
        completed = self.complete(job_id, document_id, worker_id=worker_id, lease_token=lease_token, batch_id=batch_id)
        return CommitResult.model_validate({**committed.model_dump(), **completed.model_dump(), "committed": True})

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
        `retry_delay_seconds`, counted on the database server's clock; on a schema older
        than that parameter the delay is added to this machine's clock instead (or
        `next_run_at` is sent as given)."""
        if retry_delay_seconds is not None and next_run_at is None and self.fence_level < FenceLevel.SERVER_RETRY_DELAY:
            next_run_at = datetime.now(UTC) + timedelta(seconds=retry_delay_seconds)
        return self._fenced(
            JobOutcome,
            "fail_or_retry",
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

    # -- bulk acknowledgement ---------------------------------------------------------
    # One statement for many jobs (at most MAX_ACK_ITEMS each) when the schema has it and
    # every item carries a token; otherwise one call per item. Either way: one answer per
    # item, in the order given.

    def _bulk(self, items: Sequence[CompleteItem | FailItem]) -> bool:
        return self.fence_level >= FenceLevel.BULK_ACK and all(item.lease_token is not None for item in items)

    @property
    def stages_ride_acks(self) -> bool:
        """Whether a bulk acknowledgement writes its items' stage rows (else each stage row
        is a record_stage call of its own)."""
        return self.fence_level >= FenceLevel.STAGES_IN_ACKS

    def _with_stages(self, item: CompleteItem | FailItem, fields: dict[str, Any]) -> dict[str, Any]:
        if item.stages and self.stages_ride_acks:
            fields.update(worker_id=item.worker_id, stages=[row.as_json() for row in item.stages])
        return fields

    def complete_many(self, worker_id: str, items: Sequence[CompleteItem]) -> list[CommitResult]:
        """Complete every item's job (committing its generation first, when it has one);
        a refused item (`lease_lost`, `generation_not_owned`, ...) changes nothing."""
        if not items:
            return []
        if self._bulk(items):
            return [result for part in _parts(items) for result in self._complete_part(part)]
        return [self._complete_one(worker_id, item) for item in items]

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

    def _complete_one(self, worker_id: str, item: CompleteItem) -> CommitResult:
        if item.generation_id is not None:
            done = self.commit_and_complete(
                item.job_id,
                item.document_id,
                item.generation_id,
                worker_id=worker_id,
                lease_token=item.lease_token,
                metadata=item.metadata,
                batch_id=item.batch_id,
            )
            return done if done.committed is not None else done.model_copy(update={"committed": done.ok})
        completed = self.complete(
            item.job_id,
            item.document_id,
            worker_id=worker_id,
            lease_token=item.lease_token,
            batch_id=item.batch_id,
            stage=item.stage,
        )
        return CommitResult.model_validate({**completed.model_dump(), "job_id": item.job_id, "committed": False})

    def fail_or_retry_many(self, worker_id: str, items: Sequence[FailItem]) -> list[JobOutcome]:
        if not items:
            return []
        if self._bulk(items):
            return [result for part in _parts(items) for result in self._fail_part(part)]
        return [
            self.fail_or_retry(
                i.job_id,
                i.document_id,
                worker_id=worker_id,
                lease_token=i.lease_token,
                retry=i.retry,
                error_message=i.error_message,
                batch_id=i.batch_id,
                document_status=i.document_status,
                stage=i.stage,
                retry_delay_seconds=i.retry_delay_seconds,
            )
            for i in items
        ]

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
