"""The drain's materialization names each failed document by its key and the version that
failed (Dagster's UI shows the path or URL, not only a base name); the run's progress lines."""

import re
from uuid import uuid4

from ingestion_pipeline.orchestration.assets import FAILURES_SHOWN, DrainProgress, drain_metadata
from ingestion_pipeline.worker import JobResult, Outcome, WorkerReport


def result(outcome: Outcome, key: str | None, message: str | None = None) -> JobResult:
    return JobResult(uuid4(), uuid4(), "pricing.md", outcome, 0.1, message, None, None, key, 2 if key else None)


def test_failed_documents_are_listed_by_key_and_version():
    report = WorkerReport(worker_id="w")
    report.add(result(Outcome.COMPLETED, "file:///srv/docs/terms.md"))
    report.add(result(Outcome.FAILED, "file:///srv/docs/pricing.md", "unsupported | binary"))
    report.add(result(Outcome.FAILED, None, "from before keys"))
    table = drain_metadata(report)["run_failures"].value
    assert "| file:///srv/docs/pricing.md | 2 | unsupported / binary |" in table
    assert "| pricing.md |  | from before keys |" in table and "terms.md" not in table


def test_no_failures_no_table_and_a_long_list_is_cut():
    report = WorkerReport(worker_id="w")
    report.add(result(Outcome.COMPLETED, "file:///a"))
    assert "run_failures" not in drain_metadata(report)
    for n in range(FAILURES_SHOWN + 5):
        report.add(result(Outcome.FAILED, f"file:///f{n}", "bad"))
    table = drain_metadata(report)["run_failures"].value
    assert table.count("| file:///f") == FAILURES_SHOWN and "(5 more: `ingest status`)" in table


def test_formats_table_counts_each_format_by_outcome():
    report = WorkerReport(worker_id="w")
    for mime_type, outcome in [
        ("application/pdf", Outcome.COMPLETED),
        ("application/pdf", Outcome.FAILED),
        ("image/png", Outcome.COMPLETED),
        (None, Outcome.FAILED),
    ]:
        done = result(outcome, "file:///x")
        report.add(JobResult(**{**done.__dict__, "mime_type": mime_type}))
    report.seconds = 0.3  # the run's wall time: the jobs' 0.4 s overlapped
    table = drain_metadata(report)["formats"].value
    assert table.splitlines()[0] == "| format | completed | failed | s per job | share of job time |"
    assert "| PDF | 1 | 1 | 0.10 | 50% |" in table and "| PNG | 1 | 0 | 0.10 | 25% |" in table
    assert "| unrecognised | 0 | 1 | 0.10 | 25% |" in table
    assert table.endswith("jobs run side by side, so theirs add up to 0.4 s in this 0.3 s run")
    assert report.formats()["PDF"] == {"completed": 1, "failed": 1, "seconds": 0.2, "mean_seconds": 0.1}


def test_the_progress_line_says_what_the_queue_still_holds_and_the_time_left():
    lines: list[str] = []
    progress = DrainProgress(lines.append, every=0, open_jobs=lambda: 12)
    progress.started -= 10  # ten seconds into the run
    for outcome in (Outcome.COMPLETED, Outcome.COMPLETED, Outcome.FAILED):
        progress(result(outcome, "file:///x"))
    [(done, failed, left)] = re.findall(r"indexed (\d+), failed (\d+),.*; (\d+) job", lines[-1])
    assert (done, failed, left) == ("2", "1", "12")
    # 3 finished in ~10 s: the 12 still open take ~40 s at this rate
    assert re.search(r"about (39|40|41) s at this run's rate", lines[-1]), lines[-1]
