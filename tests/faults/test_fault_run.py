"""A bounded fault run (make test): nothing lost, nothing stuck, nothing corrupted, and no
write accepted from a superseded lease token (kills, backend terminations, pauses and
stalls of one job thread past its lease, tests/faults/harness.py). The run must also have
exercised a fence (a zombie came back and was refused) and the janitor must have run
without an error: a run that never tests the fences or the janitor proves nothing."""

from tests.faults.checker import check
from tests.faults.harness import run_faults

DOCUMENTS = 800
MIN_JANITOR_PASSES = 10


def test_chaos_loses_no_job_and_corrupts_no_index(db_url, tmp_path):
    stats = run_faults(db_url, tmp_path, documents=DOCUMENTS, workers=3, batches=4, chaos_seconds=15,
                       drain_timeout=90)
    report = check(db_url, stats.histories)
    counts = f"zombie_refusals={report.stats['zombie_refusals']} {stats.summary()}\n{report.summary()}"
    print(counts)

    assert stats.kills + stats.pauses + stats.backend_terminations > 0, counts
    assert stats.stalls >= 1, counts
    assert report.stats["superseded_token_writes"] == 0, counts
    assert report.violations == [], counts
    # A fence was exercised: some zombie came back after another claim and was refused.
    assert report.stats["zombie_refusals"] >= 1, counts
    # The janitor ran all along, its calls logged, and none of them failed.
    assert stats.janitor_errors == [] and report.stats["janitor_call_errors"] == 0, counts
    assert stats.janitor_passes >= MIN_JANITOR_PASSES, counts
    assert report.stats["janitor_calls"] == 3 * stats.janitor_passes, counts
    # The deletion audit was installed and read (the janitor's cleanups go through it).
    # No document gets a second job here, so nothing may go while any job of its document
    # is open (stricter than the checker's rule, which asks it of the open job's build).
    assert report.stats["audit"] is not None and report.stats["audit"]["under_open_job"] == 0, counts
    # max_attempts=10: no job runs out of attempts under this chaos, so every job
    # completes and every document ends indexed (and the checker found them consistent).
    assert report.stats["jobs"] == {"completed": DOCUMENTS}, counts
    assert report.stats["documents"] == {"indexed": DOCUMENTS}, counts
    assert report.stats["indexed"] == DOCUMENTS, counts
