"""The claim loop: keep up to `concurrency` jobs in flight, drain or poll, stop cleanly."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db.models import ClaimedJob
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import (
    ChunkingOptions,
    Embedder,
    chunking_from_settings,
    embedder_from_settings,
    ocr_from_settings,
)
from ingestion_pipeline.settings import Settings
from ingestion_pipeline.worker.acks import AckBuffer
from ingestion_pipeline.worker.errors import TRANSIENT_ERRORS, describe
from ingestion_pipeline.worker.identity import new_worker_id
from ingestion_pipeline.worker.indexing import index_document
from ingestion_pipeline.worker.isolation import ParseLimits, ParsePool, Processed, process_document_in_child
from ingestion_pipeline.worker.job import JobContext, JobRun, Processor
from ingestion_pipeline.worker.leases import LeaseKeeper
from ingestion_pipeline.worker.outcome import JobResult
from ingestion_pipeline.worker.report import RECENT_RESULTS, WorkerReport

log = logging.getLogger(__name__)


# How often a claim loop also dead-letters stale leases on their final attempt (which no
# claim can take): at its first claim, then at most this often.
EXPIRE_EVERY_SECONDS = 30.0


class Worker:
    """One claim loop with one worker id. Jobs run in a thread pool of `concurrency`; one
    heartbeat thread renews all their leases, and jobs that finish close together are
    acknowledged in one statement. `processor` is what a job builds (default: the
    document's index generation), parsing in the worker's children (`parse_processes`,
    default INGEST_PARSE_PROCESSES: one per core; 0 parses in the jobs' threads), embedding
    with `embedder` (default: INGEST_EMBEDDER's, `embedder_from_settings`), cutting chunks
    by `chunking` (default: INGEST_CHUNK_CHARS and INGEST_CHUNK_OVERLAP_CHARS)."""

    def __init__(
        self,
        pool: ConnectionPool[psycopg.Connection[DictRow]],
        settings: Settings,
        *,
        label: str = "worker",
        concurrency: int | None = None,
        embedder: Embedder | None = None,
        chunking: ChunkingOptions | None = None,
        poll_seconds: float = 1.0,
        rpc: IngestionRpc | None = None,
        keep_results: int = RECENT_RESULTS,
        processor: Processor = index_document,
        parse_processes: int | None = None,
        parse_target: Callable[..., Processed] = process_document_in_child,
    ):
        self.worker_id = new_worker_id(label)
        self.concurrency = concurrency or settings.resolved_worker_concurrency
        self.claim_batch_size = settings.claim_batch_size
        self.min_claim = max(1, min(self.claim_batch_size, self.concurrency // 2))
        self.poll_seconds = poll_seconds
        self.claim_attempts = settings.claim_retry_attempts
        self.keep_results = keep_results
        self._expire_due = 0.0
        # `rpc` lets a caller observe every call (the fault harness logs them).
        self.rpc = rpc or IngestionRpc(pool, stale_after_seconds=settings.stale_after_seconds)
        # Each job may hold a connection while the heartbeat and an acknowledgement need one each.
        if pool.max_size < self.concurrency + 2:
            log.warning(
                "pool max size %s is small for concurrency %s: heartbeats may wait for connections "
                "(raise INGEST_POOL_MAX_SIZE to at least %s)",
                pool.max_size,
                self.concurrency,
                self.concurrency + 2,
            )
        self.leases = LeaseKeeper(
            self.rpc, self.worker_id, settings.heartbeat_interval_seconds, job_timeout=settings.job_timeout_seconds
        )
        embedder = embedder or embedder_from_settings(settings)
        # Parsing children (none: parse in the jobs' threads), started when the first job parses.
        processes = settings.parse_processes if parse_processes is None else parse_processes
        self.parse_pool = (
            ParsePool(
                ParseLimits(
                    processes=processes,
                    timeout_seconds=settings.parse_timeout_seconds,
                    memory_bytes=settings.parse_memory_mb * 2**20,
                    tasks_per_child=settings.parse_tasks_per_child,
                    fault_backoff_seconds=settings.retry_backoff_seconds,
                    fault_backoff_max_seconds=min(settings.retry_backoff_max_seconds, 60.0),
                ),
                target=parse_target,
                embedder=embedder,
            )
            if processes > 0
            else None
        )
        self.acks = AckBuffer(
            self.rpc, self.worker_id, max_delay=settings.ack_delay_seconds, max_items=settings.ack_max_jobs
        )
        self.context = JobContext(
            pool=pool,
            rpc=self.rpc,
            worker_id=self.worker_id,
            leases=self.leases,
            acks=self.acks,
            processor=processor,
            embedder=embedder,
            chunking=chunking or chunking_from_settings(settings),
            max_bytes=settings.max_file_bytes,
            retry_backoff_seconds=settings.retry_backoff_seconds,
            retry_backoff_max_seconds=settings.retry_backoff_max_seconds,
            parse_pool=self.parse_pool,
            job_timeout_seconds=settings.job_timeout_seconds,
            ocr=ocr_from_settings(settings),
        )

    def run(
        self,
        *,
        drain: bool = True,
        max_jobs: int | None = None,
        max_seconds: float | None = None,
        stop: threading.Event | None = None,
        on_result: Callable[[JobResult], None] | None = None,
    ) -> WorkerReport:
        """Claim and process jobs. With `drain`, return once nothing is claimable and
        nothing is in flight; otherwise poll until `stop` is set. Setting `stop` ends
        claiming; jobs in flight finish (or stop at their next lease check) first. The
        budgets end claiming the same way: after `max_jobs` claims, or `max_seconds` after
        the start (what a Dagster drain run uses so that runs end and a deploy can roll)."""
        report = WorkerReport(self.worker_id, keep=self.keep_results)
        started = time.monotonic()
        claim_until = started + max_seconds if max_seconds is not None else None
        self.leases.start()
        try:
            self._loop(
                report,
                drain=drain,
                max_jobs=max_jobs,
                claim_until=claim_until,
                stop=stop or threading.Event(),
                on_result=on_result,
            )
        finally:
            self.leases.close()
            if self.parse_pool is not None:
                self.parse_pool.close()
        report.seconds = time.monotonic() - started
        return report

    def _loop(
        self,
        report: WorkerReport,
        *,
        drain: bool,
        max_jobs: int | None,
        claim_until: float | None,
        stop: threading.Event,
        on_result: Callable[[JobResult], None] | None,
    ) -> None:
        claimed_total = 0
        in_flight: set[Future[JobResult]] = set()
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="ingest-job") as executor:
            while True:
                if claim_until is not None and time.monotonic() >= claim_until:
                    max_jobs = claimed_total  # the time budget is spent: claim nothing more
                room = self.concurrency - len(in_flight)
                if max_jobs is not None:
                    room = min(room, max_jobs - claimed_total)
                claimed = []
                # After a fault of the parsing pool, hold off claiming: the jobs it dropped
                # were released for other workers, and a rebuilt pool gets time to settle.
                cooldown = self.parse_pool.cooldown_remaining() if self.parse_pool is not None else 0.0
                if cooldown > 0:
                    room = 0
                # Claim when a worthwhile share of a claim's worth of slots is free (or
                # nothing is in flight): many tiny claims cost a round trip each.
                if room >= (self.min_claim if in_flight else 1) and not stop.is_set():
                    claimed = self._claim(min(room, self.claim_batch_size), stop)
                    claimed_total += len(claimed)
                    for _ in claimed:  # counted in before any of them can acknowledge
                        self.acks.job_started()
                    in_flight |= {executor.submit(JobRun(self.context, job).run) for job in claimed}
                if not in_flight:
                    finished = stop.is_set() or (max_jobs is not None and claimed_total >= max_jobs)
                    if finished or (drain and not claimed and cooldown <= 0):
                        break
                    stop.wait(min(self.poll_seconds, cooldown) if cooldown > 0 else self.poll_seconds)
                    continue
                done, in_flight = wait(in_flight, timeout=self.poll_seconds, return_when=FIRST_COMPLETED)
                for future in done:
                    result = future.result()  # JobRun.run() turns every error into an outcome
                    report.add(result)
                    self._notify(on_result, result)

    def _claim(self, limit: int, stop: threading.Event) -> list[ClaimedJob]:
        """Claim, riding out a short database outage (INGEST_CLAIM_RETRY_ATTEMPTS tries with
        doubling waits); a longer one ends the run with the error, after the jobs in flight
        finish (the executor shuts down)."""
        for attempt in range(1, self.claim_attempts + 1):
            if stop.is_set():  # a stop requested during the back-off: claim nothing more
                return []
            try:
                self._expire_exhausted_leases()
                return self.rpc.claim(self.worker_id, limit=limit)
            except TRANSIENT_ERRORS as exc:
                if attempt == self.claim_attempts:
                    raise
                if stop.is_set():
                    return []
                delay = min(2**attempt, 30)
                log.warning("claim failed (%s); retrying in %ss", describe(exc), delay)
                stop.wait(delay)
        return []

    def _expire_exhausted_leases(self) -> None:
        """A job whose worker died on its final attempt keeps a stale lease that no claim
        may take (attempts are exhausted): dead-letter it and refresh its batch, so that
        `ingest work` alone (no Dagster janitor) never leaves it `processing` forever."""
        now = time.monotonic()
        if now < self._expire_due:
            return
        expired = self.rpc.expire_stale()
        self._expire_due = now + EXPIRE_EVERY_SECONDS
        if expired.expired:
            log.warning(
                "dead-lettered %s job(s) whose lease expired on the final attempt: %s",
                expired.expired,
                ", ".join(str(j) for j in expired.job_ids),
            )

    @staticmethod
    def _notify(on_result: Callable[[JobResult], None] | None, result: JobResult) -> None:
        if on_result is None:
            return
        try:
            on_result(result)
        except Exception:  # a progress callback must not stop the loop
            log.exception("on_result callback failed")
