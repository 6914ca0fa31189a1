"""One claimed job, from its lease to its acknowledgement: the processor builds (by default
the document's next index generation, worker/indexing.py), then the job is completed,
failed or retried through the worker's acknowledgement buffer. Every error becomes an
outcome; a lost lease stops the job without another write."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db.models import ClaimedJob, CompleteItem, FailItem, RpcResult, StageRow
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import DEFAULT_OCR, ChunkingOptions, Embedder, OcrOptions, ProcessingError
from ingestion_pipeline.worker.acks import AckBuffer
from ingestion_pipeline.worker.errors import (
    TRANSIENT_ERRORS,
    LeaseLost,
    WorkerFault,
    describe,
    is_transient,
    printable,
)
from ingestion_pipeline.worker.isolation import ParsePool
from ingestion_pipeline.worker.leases import LeaseKeeper
from ingestion_pipeline.worker.outcome import JobResult, Outcome

R = TypeVar("R", bound=RpcResult)
# What a stage logs (with its error) before it re-raises.
_STAGE_ERRORS: tuple[type[BaseException], ...] = (ProcessingError, WorkerFault, *TRANSIENT_ERRORS)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Built:
    """What a processor made of a job: the generation to commit with the job's completion
    (None: nothing to commit, the job just completes) and the document's metadata."""

    generation_id: UUID | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    chunk_count: int | None = None
    embedder: dict[str, Any] | None = None  # what the generation records of its embedder


Processor = Callable[["JobRun"], Built]


@dataclass(frozen=True)
class JobContext:
    pool: ConnectionPool[psycopg.Connection[DictRow]]
    rpc: IngestionRpc
    worker_id: str
    leases: LeaseKeeper
    acks: AckBuffer
    processor: Processor
    embedder: Embedder
    chunking: ChunkingOptions
    max_bytes: int
    retry_backoff_seconds: float
    retry_backoff_max_seconds: float
    parse_pool: ParsePool | None = None  # None: parse in the job's own thread
    job_timeout_seconds: float | None = None
    ocr: OcrOptions = DEFAULT_OCR


def backoff_seconds(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff with jitter (half to full delay), so retries spread out. The
    database adds it to its own clock (the claim compares next_run_at with its now())."""
    delay: float = min(cap, base * 2 ** max(attempt - 1, 0))
    return delay * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not a secret


class JobRun:
    def __init__(self, ctx: JobContext, job: ClaimedJob):
        self.ctx = ctx
        self.job = job
        self.started = time.monotonic()
        # Stage rows wait here and ride the job's acknowledgement (one transaction, fenced by
        # the same token) instead of a fenced call each.
        self._stage_rows: list[StageRow] = []
        self.mime_type: str | None = None  # known once parsed (or failed after its type was known)

    def run(self) -> JobResult:
        """Build and acknowledge. The loop counted this job into the acknowledgement buffer
        when it claimed it; whatever happens, it is counted out at the end."""
        try:
            with self.ctx.leases.hold(self.job) as lease:
                self.lease = lease
                return self._complete(self.ctx.processor(self))
        except LeaseLost as exc:
            if self.lease.timed_out.is_set():  # still our lease, just no longer renewed
                return self._fail(f"the job took longer than {self.ctx.job_timeout_seconds:g} s", retry=False)
            log.info("job %s: %s; stopped without further writes", self.job.job_id, exc)
            return self._result(Outcome.LEASE_LOST, str(exc))
        except ProcessingError as exc:
            self.mime_type = exc.mime_type
            return self._fail(str(exc), retry=False)
        except WorkerFault as exc:  # the worker's parsing pool failed, not (as far as we can tell) the document
            return self._release(str(exc))
        except Exception as exc:  # transient by class, or unexpected: retry while attempts remain
            if not is_transient(exc):
                log.exception("job %s: unexpected error", self.job.job_id)
            return self._fail(describe(exc), retry=True)
        finally:
            self.ctx.acks.job_finished()

    def _complete(self, built: Built) -> JobResult:
        job = self.job
        self.mime_type = built.metadata.get("mime_type")
        # The lease has a whole window left (heartbeats land at most a third of it apart):
        # stop renewing it now, so no heartbeat races the completion.
        self.lease.release()
        self.lease.check()
        item = CompleteItem(
            job.job_id,
            job.document_id,
            job.lease_token,
            built.generation_id,
            built.metadata,
            job.batch_id,
            worker_id=self.ctx.worker_id,
            stages=self._stages(),
            embedder=built.embedder,
        )
        if built.generation_id is None:
            self.fenced(self.ctx.acks.complete(item))
        else:
            # Commit and complete together: the document is never indexed under a job that
            # then ends failed (one transaction on the lease-token schema).
            with self.stage("commit", 95, completes_job=True):
                self.fenced(self.ctx.acks.complete(item))
        return self._result(Outcome.COMPLETED, chunk_count=built.chunk_count)

    # -- for processors -------------------------------------------------------------

    @contextmanager
    def stage(self, stage: str, progress: int, completes_job: bool = False, **detail: Any) -> Iterator[None]:
        """Check the lease, run the stage, log it with its duration. The log row rides the
        job's acknowledgement, so after a takeover nothing more is written; the stage that
        completes the job is timed by the acknowledgement itself."""
        self.lease.check()
        self.lease.report(stage, progress)
        started_at = datetime.now(UTC)
        began = time.monotonic()
        try:
            yield
        except _STAGE_ERRORS as exc:
            detail.update(error=describe(exc), seconds=round(time.monotonic() - began, 4))
            self._hold_stage_row(stage, started_at, detail)  # rides the failure's acknowledgement
            raise
        detail["seconds"] = round(time.monotonic() - began, 4)
        if completes_job:  # the acknowledgement that ends this stage already went
            return
        self._hold_stage_row(stage, started_at, detail)
        self.lease.check()

    def record_stage(self, stage: str, seconds: float, **detail: Any) -> None:
        """Log a stage that ran elsewhere (a parsing child) with the duration measured there."""
        detail["seconds"] = round(seconds, 4)
        self._hold_stage_row(stage, datetime.now(UTC) - timedelta(seconds=seconds), detail)
        self.lease.check()

    def fenced(self, result: R) -> R:
        """A fenced call's answer: refused because the lease is gone -> LeaseLost."""
        if result.lease_lost:
            self.lease.lost.set()
            raise LeaseLost(f"lease on job {self.job.job_id} was lost")
        if not result.ok:
            raise RuntimeError(f"RPC refused: {result.reason}")
        return result

    # -- internals ------------------------------------------------------------------

    def _stages(self) -> tuple[StageRow, ...]:
        return tuple(self._stage_rows)

    def _hold_stage_row(self, stage: str, started_at: datetime, detail: dict[str, Any]) -> None:
        self._stage_rows.append(StageRow(stage, started_at, datetime.now(UTC), detail))

    def _fail(self, message: str, *, retry: bool) -> JobResult:
        job, ctx = self.job, self.ctx
        message = printable(message)  # a parser's words may quote the file's bytes: every format's error ends here
        delay = backoff_seconds(job.attempt_count, ctx.retry_backoff_seconds, ctx.retry_backoff_max_seconds)
        try:
            outcome = ctx.acks.fail(
                FailItem(
                    job.job_id,
                    job.document_id,
                    job.lease_token,
                    retry=retry,
                    error_message=message,
                    stage="retry_wait" if retry else "failed",
                    retry_delay_seconds=delay if retry else None,
                    batch_id=job.batch_id,
                    worker_id=ctx.worker_id,
                    stages=self._stages(),
                )
            )
        except Exception as exc:  # noqa: BLE001 - whatever it was, the job is abandoned to its lease
            log.error("job %s: could not record failure (%s); its lease will expire", job.job_id, describe(exc))
            return self._result(Outcome.ABANDONED, f"{message}; then: {describe(exc)}")
        if outcome.lease_lost:
            return self._result(Outcome.LEASE_LOST, message)
        return self._result(Outcome.RETRIED if outcome.retried else Outcome.FAILED, message)

    def _release(self, message: str) -> JobResult:
        """Back to pending at once (another worker may take it; this one backs off), the
        claim's attempt refunded while the job's worker faults stay within its attempts:
        past that, charged like a retry, so a document that kills every child that parses
        it still ends failed (release_ingestion_job)."""
        job, ctx = self.job, self.ctx
        message = printable(message)
        item = FailItem(
            job.job_id,
            job.document_id,
            job.lease_token,
            retry=True,
            error_message=message,
            stage="retry_wait",
            retry_delay_seconds=0.0,
            batch_id=job.batch_id,
            worker_id=ctx.worker_id,
            stages=self._stages(),
        )
        try:
            outcome = ctx.rpc.release(item)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the job is abandoned to its lease
            log.error("job %s: could not release it (%s); its lease will expire", job.job_id, describe(exc))
            return self._result(Outcome.ABANDONED, f"{message}; then: {describe(exc)}")
        if outcome.lease_lost:
            return self._result(Outcome.LEASE_LOST, message)
        if not outcome.ok:
            return self._result(Outcome.ABANDONED, f"{message}; then: release refused ({outcome.reason})")
        if outcome.refunded:
            return self._result(Outcome.RELEASED, message)
        return self._result(Outcome.RETRIED if outcome.retried else Outcome.FAILED, message)

    def _result(self, outcome: Outcome, message: str | None = None, chunk_count: int | None = None) -> JobResult:
        return JobResult(
            self.job.job_id,
            self.job.document_id,
            self.job.source_name,
            outcome,
            round(time.monotonic() - self.started, 4),
            message,
            chunk_count,
            self.job.batch_id,
            self.job.source_key,
            self.job.document_version,
            self.mime_type,
        )
