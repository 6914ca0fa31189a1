"""The drain's materialization names each failed document by its key and the version that
failed (Dagster's UI shows the path or URL, not only a base name)."""

from uuid import uuid4

from ingestion_pipeline.orchestration.assets import FAILURES_SHOWN, drain_metadata
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
    table = drain_metadata(report)["formats"].value
    assert table.splitlines()[0] == "| format | completed | failed | seconds |"
    assert "| PDF | 1 | 1 | 0.2 |" in table and "| PNG | 1 | 0 | 0.1 |" in table
    assert "| unrecognised | 0 | 1 | 0.1 |" in table
