"""A bounded fault run (make test): nothing lost, nothing stuck, nothing corrupted, and no
write accepted from a superseded lease token (kills, backend terminations, pauses and
stalls of one job thread past its lease, tests/faults/harness.py)."""

from tests.faults.checker import check
from tests.faults.harness import run_faults


def test_chaos_loses_no_job_and_corrupts_no_index(db_url, tmp_path):
    stats = run_faults(db_url, tmp_path, documents=800, workers=3, batches=4, chaos_seconds=15, drain_timeout=90)
    report = check(db_url, sorted(tmp_path.glob("w*.jsonl")))

    assert stats.kills + stats.pauses + stats.backend_terminations > 0, stats
    assert stats.stalls >= 1, stats
    assert report.stats["superseded_token_writes"] == 0, report.summary()
    assert report.violations == [], report.summary()
    assert report.stats["jobs"].get("completed", 0) + report.stats["jobs"].get("failed", 0) == 800
    assert report.stats["indexed"] > 0
