"""Process one claimed job from source bytes to a committed generation."""

from __future__ import annotations

import logging
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterator

from psycopg_pool import ConnectionPool

from ingestion_pipeline.db.models import ClaimedJob, RpcResult
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import (
    ChunkingOptions,
    Embedder,
    ProcessingError,
    chunk_sections,
    embed_chunks,
    parse,
)
from ingestion_pipeline.worker.artifacts import write_generation
from ingestion_pipeline.worker.errors import (
    TRANSIENT_ERRORS,
    LeaseLost,
    describe,
    is_build_refused,
    is_transient,
)
from ingestion_pipeline.worker.heartbeat import LeaseKeeper
from ingestion_pipeline.worker.outcome import JobResult, Outcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobContext:
    pool: ConnectionPool
    rpc: IngestionRpc
    worker_id: str
    embedder: Embedder
    chunking: ChunkingOptions
    max_bytes: int
    heartbeat_seconds: float
    retry_backoff_seconds: float
    retry_backoff_max_seconds: float


def backoff_seconds(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff with jitter (half to full delay), so retries spread out. The
    database adds it to its own clock (the claim compares next_run_at with its now())."""
    delay = min(cap, base * 2 ** max(attempt - 1, 0))
    return delay * random.uniform(0.5, 1.0)


class JobRun:
    def __init__(self, ctx: JobContext, job: ClaimedJob):
        self.ctx = ctx
        self.job = job
        self.started = time.monotonic()

    def run(self) -> JobResult:
        try:
            with LeaseKeeper(self.ctx.rpc, self.job.job_id, self.ctx.worker_id, self.job.lease_token,
                             self.ctx.heartbeat_seconds) as keeper:
                self.keeper = keeper
                chunk_count = self._build()
            return self._result(Outcome.COMPLETED, chunk_count=chunk_count)
        except LeaseLost as exc:
            log.info("job %s: %s; stopped without further writes", self.job.job_id, exc)
            return self._result(Outcome.LEASE_LOST, str(exc))
        except ProcessingError as exc:
            return self._fail(str(exc), retry=False)
        except Exception as exc:  # transient by class, or unexpected: retry while attempts remain
            if not is_transient(exc):
                log.exception("job %s: unexpected error", self.job.job_id)
            return self._fail(describe(exc), retry=True)

    def _build(self) -> int:
        job, ctx = self.job, self.ctx
        with self._stage("load", 5):
            with ctx.pool.connection() as conn:
                row = conn.execute(query("load_document_source"), {"document_id": job.document_id}).fetchone()
            if row is None:
                raise ProcessingError("the document's uploaded bytes are missing")
        with self._stage("parse", 20):
            parsed = parse(bytes(row["content"]), job.source_name, max_bytes=ctx.max_bytes)
        with self._stage("chunk", 40):
            chunks = chunk_sections(parsed.sections, ctx.chunking)
        with self._stage("embed", 60, embedder=ctx.embedder.name):
            chunks = embed_chunks(chunks, ctx.embedder)
        with self._stage("write", 80, chunks=len(chunks)):
            begun = self._fenced(ctx.rpc.begin_generation(job.job_id, job.document_id, ctx.worker_id,
                                                           lease_token=job.lease_token))
            self._write(begun.generation_id, parsed, chunks)
        with self._stage("commit", 95, completes_job=True):
            metadata = {"title": parsed.title, "mime_type": parsed.mime_type, "embedder": ctx.embedder.name}
            # The lease has a whole window left (heartbeats land at most a third of it
            # apart): stop renewing it now, so no heartbeat races the completion.
            self.keeper.stop()
            self.keeper.check()
            # Commit and complete together: the document is never indexed under a job that
            # then ends failed (one transaction on the lease-token schema).
            self._fenced(ctx.rpc.commit_and_complete(
                job.job_id, job.document_id, begun.generation_id, worker_id=ctx.worker_id,
                lease_token=job.lease_token, metadata={k: v for k, v in metadata.items() if v},
                batch_id=job.batch_id))
        return len(chunks)

    def _write(self, generation_id, parsed, chunks) -> None:
        try:
            with self.ctx.pool.connection() as conn:
                write_generation(conn, self.job.document_id, generation_id, parsed, chunks, self.keeper.check)
        except Exception as exc:
            if is_build_refused(exc):  # the database says this claim no longer holds the job
                self.keeper.lost.set()
                raise LeaseLost(f"lease on job {self.job.job_id} was lost (artifact rows refused: "
                                f"{describe(exc)})") from None
            raise

    @contextmanager
    def _stage(self, stage: str, progress: int, completes_job: bool = False, **detail) -> Iterator[None]:
        """Check the lease, run the stage, log it with its duration. The log row is written
        through a fenced RPC, so after a takeover nothing more is written. A stage that
        completes the job has released the lease when it is logged: a schema that refuses
        that row (worker-id fences) costs the row, not the job."""
        self.keeper.check()
        self.keeper.report(stage, progress)
        started_at = datetime.now(timezone.utc)
        began = time.monotonic()
        try:
            yield
        except (ProcessingError, *TRANSIENT_ERRORS) as exc:
            detail.update(error=describe(exc), seconds=round(time.monotonic() - began, 4))
            self._log_stage_best_effort(stage, started_at, detail)  # never mask the stage's own error
            raise
        detail["seconds"] = round(time.monotonic() - began, 4)
        if completes_job:  # the job is done: its stage row is a metric now, not a write to fence
            self._log_stage_best_effort(stage, started_at, detail)
            return
        if self._log_stage(stage, started_at, detail).lease_lost:  # a database error here is transient
            self.keeper.lost.set()  # the next lease check stops the job
        self.keeper.check()

    def _log_stage_best_effort(self, stage: str, started_at: datetime, detail: dict) -> None:
        try:
            self._log_stage(stage, started_at, detail)
        except Exception as log_exc:
            log.warning("job %s: could not log stage %s: %s", self.job.job_id, stage, describe(log_exc))

    def _log_stage(self, stage: str, started_at: datetime, detail: dict) -> RpcResult:
        return self.ctx.rpc.record_stage(self.job.job_id, self.ctx.worker_id, stage, started_at=started_at,
                                         finished_at=datetime.now(timezone.utc), detail=detail,
                                         lease_token=self.job.lease_token)

    def _fenced(self, result: RpcResult) -> RpcResult:
        if result.lease_lost:
            self.keeper.lost.set()
            raise LeaseLost(f"lease on job {self.job.job_id} was lost")
        if not result.ok:
            raise RuntimeError(f"RPC refused: {result.reason}")
        return result

    def _fail(self, message: str, *, retry: bool) -> JobResult:
        job, ctx = self.job, self.ctx
        delay = backoff_seconds(job.attempt_count, ctx.retry_backoff_seconds, ctx.retry_backoff_max_seconds)
        try:
            outcome = ctx.rpc.fail_or_retry(job.job_id, job.document_id, worker_id=ctx.worker_id,
                                            lease_token=job.lease_token, retry=retry, error_message=message,
                                            retry_delay_seconds=delay if retry else None,
                                            batch_id=job.batch_id, stage="retry_wait" if retry else "failed")
        except Exception as exc:
            log.error("job %s: could not record failure (%s); its lease will expire", job.job_id, describe(exc))
            return self._result(Outcome.ABANDONED, f"{message}; then: {describe(exc)}")
        if outcome.lease_lost:
            return self._result(Outcome.LEASE_LOST, message)
        return self._result(Outcome.RETRIED if outcome.retried else Outcome.FAILED, message)

    def _result(self, outcome: Outcome, message: str | None = None, chunk_count: int | None = None) -> JobResult:
        return JobResult(self.job.job_id, self.job.document_id, self.job.source_name, outcome,
                         round(time.monotonic() - self.started, 4), message, chunk_count)
