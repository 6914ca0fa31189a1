"""What a worker run did: outcome counters for every job, per format too, and only the
most recent results (a long-running `ingest work` must not grow with the jobs it ran)."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ingestion_pipeline.processing import format_name
from ingestion_pipeline.worker.outcome import JobResult, Outcome

RECENT_RESULTS = 100


@dataclass
class WorkerReport:
    """Counters for every job, and only the most recent results (a long-running
    `ingest work` must not grow with the number of jobs it has processed)."""

    worker_id: str
    keep: int = RECENT_RESULTS
    results: deque[JobResult] = field(init=False)
    outcomes: Counter[str] = field(init=False, default_factory=Counter)
    seconds: float = 0.0
    chunks: int = 0  # written by completed jobs
    batch_ids: set[UUID] = field(init=False, default_factory=set)  # batches whose jobs this worker ended
    # (format, outcome) -> jobs, and format -> seconds: what `ingest work` reports per format
    by_format: Counter[tuple[str, str]] = field(init=False, default_factory=Counter)
    format_seconds: dict[str, float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.results = deque(maxlen=self.keep)

    def add(self, result: JobResult) -> None:
        self.outcomes[result.outcome.value] += 1
        self.results.append(result)
        self.chunks += result.chunk_count or 0
        name = format_name(result.mime_type)
        self.by_format[name, result.outcome.value] += 1
        self.format_seconds[name] = self.format_seconds.get(name, 0.0) + result.seconds
        if result.batch_id is not None:
            self.batch_ids.add(result.batch_id)

    @property
    def counts(self) -> dict[str, int]:
        return {outcome.value: self.outcomes.get(outcome.value, 0) for outcome in Outcome}

    @property
    def claimed(self) -> int:
        return sum(self.outcomes.values())

    @property
    def docs_per_second(self) -> float:
        done = self.counts[Outcome.COMPLETED.value]
        return round(done / self.seconds, 2) if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker_id,
            "claimed": self.claimed,
            **self.counts,
            "seconds": round(self.seconds, 3),
            "docs_per_second": self.docs_per_second,
            "formats": self.formats(),
        }

    def formats(self) -> dict[str, dict[str, float]]:
        """Per format (PDF, DOCX, …; "unrecognised" for a file refused before its type was
        known): jobs per outcome, their job seconds added up (`seconds`) and per job
        (`mean_seconds`). A job's seconds run from its claim to its result, waits for a
        parsing child included, and jobs overlap: the sums exceed the run's wall time."""
        out: dict[str, dict[str, float]] = {}
        for (name, outcome), count in sorted(self.by_format.items()):
            out.setdefault(name, {})[outcome] = count
        for name, seconds in self.format_seconds.items():
            jobs = sum(count for (format_, _), count in self.by_format.items() if format_ == name)
            out[name]["seconds"] = round(seconds, 3)
            out[name]["mean_seconds"] = round(seconds / jobs, 3) if jobs else 0.0
        return out

    def format_table(self) -> tuple[list[str], list[list[object]]]:
        """formats() as a table (the CLI's and the Dagster materialization's): a row per
        format, a column per outcome that occurred (in Outcome's order), then a job's mean
        seconds and the format's share of all the jobs' seconds. Not the summed seconds: jobs
        run side by side, and a sum of 283.8 s inside a 39 s run reads as a contradiction."""
        formats = self.formats()
        outcomes = [o.value for o in Outcome if any(o.value in counts for counts in formats.values())]
        total = sum(counts["seconds"] for counts in formats.values())
        rows: list[list[object]] = [
            [
                name,
                *(int(counts.get(o, 0)) for o in outcomes),
                f"{counts['mean_seconds']:.2f}",
                f"{counts['seconds'] / total:.0%}" if total > 0 else "",
            ]
            for name, counts in formats.items()
        ]
        return ["format", *outcomes, "s per job", "share of job time"], rows

    def format_note(self) -> str:
        """What the table's seconds are, with the numbers that tell them from the run's."""
        total = sum(self.format_seconds.values())
        return (
            f"s per job: from its claim to its result, waiting for a parsing child included; jobs run side "
            f"by side, so theirs add up to {total:.1f} s in this {self.seconds:.1f} s run"
        )
