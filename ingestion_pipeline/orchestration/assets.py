"""The asset this pipeline builds: `document_index`, the committed index generations
(pages, sections, chunks) in PostgreSQL. Materializing it drains the queue: each drain run
records one materialization with the index's totals and what the run itself did (`run_*`),
and marks itself when documents failed (the run tag `ingestion/failed_documents`; the WARN
check `no_failed_documents`, one of the checks every drain run runs, says the index's)."""

# no `from __future__ import annotations`: Dagster reads the config annotations at runtime

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import dagster as dg
import psycopg

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import DatabaseUnavailable, IngestError
from ingestion_pipeline.orchestration.index_totals import totals_metadata
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from ingestion_pipeline.settings import Settings
from ingestion_pipeline.worker import JobResult, Outcome, Worker, WorkerReport

INDEX_KEY = dg.AssetKey("document_index")
PROGRESS_EVERY_SECONDS = 15.0

# A drain run in which documents failed carries this tag (their number): the runs list shows
# it and filters on it, where the run itself is green (a bad document never fails a run).
FAILED_DOCUMENTS_TAG = "ingestion/failed_documents"


class DrainConfig(dg.Config):
    """Budgets of one drain run; unset means the settings (INGEST_DRAIN_JOBS_PER_RUN,
    INGEST_DRAIN_RUN_SECONDS, INGEST_WORKER_CONCURRENCY)."""

    max_jobs: int | None = None
    max_seconds: float | None = None
    concurrency: int | None = None


@dg.asset(
    key=INDEX_KEY,
    group_name="ingestion",
    kinds={"postgres"},
    description="Committed index generations of the uploaded documents (pages, sections, chunks with "
    "full-text vectors). A materialization claims pending jobs while any are claimable, "
    "up to a job and a time budget, and indexes them. Its metadata: the index's totals (documents by "
    "status, chunks, collections, sources, failed jobs) read from the database, then this run's own "
    "numbers (run_*); a drain by `ingest work` is reported by index_totals_sensor.",
)
def document_index(
    context: dg.AssetExecutionContext, config: DrainConfig, database: DatabaseResource, processing: ProcessingResource
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # bare, as Dagster wants it
    settings = database.settings()
    max_jobs = config.max_jobs or settings.drain_jobs_per_run
    max_seconds = config.max_seconds or settings.drain_run_seconds
    context.log.info(f"draining: at most {max_jobs} job(s), claiming for at most {max_seconds:g} s")
    try:
        with database.pool() as pool:
            worker = Worker(
                pool,
                settings,
                label=f"dagster-{context.run.run_id[:8]}",
                concurrency=config.concurrency,
                embedder=processing.make_embedder(settings),
                chunking=processing.chunking(settings),
                parse_processes=parse_processes_per_run(settings),
            )
            progress = DrainProgress(context.log.info, open_jobs=lambda: open_jobs(worker.rpc))
            report = worker.run(drain=True, max_jobs=max_jobs, max_seconds=max_seconds, on_result=progress)
            totals = IngestionRpc(pool).index_totals()  # after the drain: the index it leaves
    except (DatabaseUnavailable, psycopg.OperationalError) as exc:
        # Infrastructure, not a document: the run fails, with the reason in one line.
        raise dg.Failure(description=f"ingestion database unavailable: {exc}", allow_retries=True) from None
    except IngestError as exc:  # e.g. pending migrations, or a pool the server has no room for
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    context.log.info(drain_summary(report))
    failed = report.counts["failed"]
    if failed:
        context.instance.add_run_tags(context.run.run_id, {FAILED_DOCUMENTS_TAG: str(failed)})
    return dg.MaterializeResult(metadata={**totals_metadata(totals), **drain_metadata(report)})


def parse_processes_per_run(settings: Settings) -> int:
    """The sensor runs up to INGEST_MAX_DRAIN_RUNS drain runs at once: they share the
    machine's parsing children (INGEST_PARSE_PROCESSES, one per core) rather than each
    starting one per core. 0 (parse in the run's threads) stays 0."""
    if settings.parse_processes == 0:
        return 0
    return max(1, settings.parse_processes // settings.max_drain_runs)


def open_jobs(rpc: IngestionRpc) -> int:
    """The queue's open jobs (pending now or later, processing), through rpc_sensor_state."""
    state = rpc.sensor_state(limit=1)
    return state.claimable + state.pending_later + state.processing


class DrainProgress:
    """A line in the run's log every PROGRESS_EVERY_SECONDS while the run drains: a long
    run shows how far it got before its materialization is recorded, and, given
    `open_jobs`, how many jobs the queue still holds and the time they take at this rate."""

    def __init__(
        self, log: Callable[[str], None], every: float | None = None, open_jobs: Callable[[], int] | None = None
    ):
        self.log = log
        self.every = PROGRESS_EVERY_SECONDS if every is None else every
        self.open_jobs = open_jobs
        self.started = self.last = time.monotonic()
        self.outcomes: Counter[str] = Counter()

    def __call__(self, result: JobResult) -> None:
        self.outcomes[result.outcome.value] += 1
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            done = self.outcomes["completed"]
            rate = (done + self.outcomes["failed"]) / (now - self.started)
            self.log(
                f"progress: indexed {done}, failed {self.outcomes['failed']}, "
                f"retried {self.outcomes['retried']} in {now - self.started:.0f} s "
                f"({done / (now - self.started):.1f} docs/s){self._left(rate)}"
            )

    def _left(self, rate: float) -> str:
        if self.open_jobs is None:
            return ""
        left = self.open_jobs()
        said = f"; {left} job(s) still open in the queue"
        if rate <= 0 or not left:
            return said
        return f"{said}, about {left / rate:.0f} s at this run's rate (less with other runs)"


def drain_metadata(report: WorkerReport) -> dict[str, Any]:
    """What this run did (`run_*`: the index's totals are the keys without the prefix)."""
    counts = report.counts
    return {
        "run_indexed": counts["completed"],
        "run_failed": counts["failed"],
        "run_retried": counts["retried"],
        "run_lease_lost": counts["lease_lost"],
        "run_abandoned": counts["abandoned"],
        "run_claimed": report.claimed,
        "run_chunks": report.chunks,
        "run_batches_touched": len(report.batch_ids),
        "docs_per_second": dg.MetadataValue.float(float(report.docs_per_second)),
        "seconds": dg.MetadataValue.float(round(report.seconds, 3)),
        "worker_id": report.worker_id,
        **failures_metadata(report),
        **formats_metadata(report),
    }


def formats_metadata(report: WorkerReport) -> dict[str, Any]:
    """Per format (PDF, DOCX, PNG, …): documents per outcome, a job's mean seconds and the
    format's share of the jobs' time, as a table, with what those seconds are under it."""
    header, rows = report.format_table()
    if not rows:
        return {}
    lines: list[list[object]] = [list(header), ["---"] * len(header), *rows]
    table = "\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines)
    return {"formats": dg.MetadataValue.md(f"{table}\n\n{report.format_note()}")}


FAILURES_SHOWN = 20


def failures_metadata(report: WorkerReport) -> dict[str, Any]:
    """The documents that failed, by their key (the file's path, the object's URL) and the
    version that failed, with the message: a table in the materialization."""
    failed = [r for r in report.results if r.outcome is Outcome.FAILED]
    if not failed:
        return {}
    rows = [
        f"| {r.shown_name} | {r.version or ''} | {(r.message or '').replace('|', '/')} |"
        for r in failed[:FAILURES_SHOWN]
    ]
    more = [f"\n({len(failed) - FAILURES_SHOWN} more: `ingest status`)"] if len(failed) > FAILURES_SHOWN else []
    table = "\n".join(["| document | version | error |", "| --- | --- | --- |", *rows, *more])
    return {"run_failures": dg.MetadataValue.md(table)}


def drain_summary(report: WorkerReport) -> str:
    counts = report.counts
    return (
        f"indexed {counts['completed']}, failed {counts['failed']}, retried {counts['retried']} of "
        f"{report.claimed} claimed job(s); {report.chunks} chunk(s) in {len(report.batch_ids)} batch(es); "
        f"{report.docs_per_second} docs/s"
    )
