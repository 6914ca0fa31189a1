"""How the soak's sync loop (sync_loop.py) judges a pass that exits 1: entries that failed
because the churn writer removed their files while the pass ran are expected
(`churned_mid_read`); an entry failure of a file the writer did not touch, or for a reason a
change of its file does not explain, stays `unexpected`. The writer's log tells which files
it touched during a pass, the action under way when the pass began among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults.sync_loop import ChurnLog, SyncLoop, classify

GONE = "No such file or directory"


def sync_output(*failures: tuple[Path, str]) -> bytes:
    """An `ingest sync --json` report with these failures (the fields classify reads)."""
    listed = [{"source_key": path.as_uri(), "reason": reason} for path, reason in failures]
    counts = {"new": 0, "changed": 1, "requeued": 0, "failed": len(failures)}
    return json.dumps({"counts": counts, "batch_id": None, "failures": listed}).encode()


def test_a_failure_of_files_the_writer_removed_during_the_pass_is_expected(tmp_path):
    out = sync_output((tmp_path / "f01.txt", GONE), (tmp_path / "deep" / "f04.txt", GONE))
    end = classify(1, out, b"ingest: 2 entries failed ...\n", {tmp_path / "f01.txt", tmp_path / "deep" / "f04.txt"})
    assert (end.outcome, end.error) == ("churned_mid_read", None)
    assert end.report is not None and end.report["counts"]["failed"] == 2


def test_a_failure_of_a_file_the_writer_did_not_touch_is_unexpected(tmp_path):
    out = sync_output((tmp_path / "f01.txt", GONE), (tmp_path / "f02.txt", GONE))
    end = classify(1, out, b"", {tmp_path / "f01.txt"})
    assert end.outcome == "unexpected"
    assert end.error == f"entry failed, untouched by the writer: {(tmp_path / 'f02.txt').as_uri()}: {GONE}"


def test_a_failure_a_change_of_the_file_does_not_explain_is_unexpected(tmp_path):
    end = classify(1, sync_output((tmp_path / "f01.txt", "not deleted: lease_lost")), b"", {tmp_path / "f01.txt"})
    assert end.outcome == "unexpected" and end.error is not None and "not a change of its file" in end.error


@pytest.mark.parametrize(
    ("err", "outcome"),
    [
        (b"ingest: error: database unavailable: the server is restarting\n", "database_unavailable"),
        (b"ingest: error: batch 1234 was cancelled\n", "batch_cancelled"),
        (b"ingest: error: something else\n", "unexpected"),
        (b"", "unexpected"),
    ],
)
def test_an_exit_without_a_report_is_judged_by_its_last_stderr_line(err, outcome):
    end = classify(1, b"", err, set())
    assert end.outcome == outcome and end.report is None
    assert end.error == (None if outcome != "unexpected" else (err.decode().strip() or "exit 1"))


def test_the_log_holds_the_files_touched_between_two_offsets_and_the_action_under_way(tmp_path):
    log = ChurnLog(tmp_path / "churn.log")
    assert log.offset() == 0 and log.touched(0, 0, in_flight=True) == set()
    share = tmp_path / "share"
    log.path.write_text(f"write {share / 'f01.txt'}\nunlink {share / 'f02.txt'}\n")
    since = log.offset()
    with log.path.open("a") as more:
        more.write(f"unlink {share / 'f03.txt'}\nwrite {share / 'f04.txt'}\n")
    until = log.offset()
    with log.path.open("a") as later:  # after the pass ended
        later.write(f"unlink {share / 'f05.txt'}\n")
    during = {share / "f03.txt", share / "f04.txt"}
    assert log.touched(since, until, in_flight=False) == during  # the writer had stopped
    assert log.touched(since, until, in_flight=True) == during | {share / "f02.txt"}  # f02's unlink may not be done


@pytest.mark.one_server
def test_a_real_pass_whose_entry_fails_untouched_is_unexpected_and_says_why(db_url, tmp_path):
    """`ingest sync --json` run by the loop, a link to nothing in its folder and no writer:
    the pass exits 1 and is held unexpected, naming the entry."""
    loop = SyncLoop(db_url, tmp_path, seed_value=1)
    loop.share.mkdir()
    (loop.share / "a.txt").write_text("The heron waits.\n")
    (loop.share / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    assert loop.run_pass(kill_after=None) == "unexpected"
    assert loop.stats.unexpected == [
        f"entry failed, not a change of its file: {(loop.share / 'dangling.txt').as_uri()}: "
        f"a link to nothing ({tmp_path / 'nowhere.txt'})"
    ]
    assert loop.stats.counts == {}  # an unexpected pass's counts are not summed
