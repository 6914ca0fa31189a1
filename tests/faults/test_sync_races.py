"""Syncs racing new versions and deletes (issue 44): rounds of a folder changing under syncs
while two worker processes drain. Each round deletes files, rewrites others, brings back one
deleted in an earlier round and enqueues one as `ingest enqueue` does (before the sync, and
during its listing), then syncs; at the sync's first delete (its vanished keys read) every
other vanished file comes back with new bytes and is enqueued (tests/faults/sync_race.py):
the race forced by the sync's own keep_lease hook, no timing involved.

Runs twice (`sync_deletes_schema`). At head the syncs delete only the files still gone, and
at quiescence, before any further sync, the index mirrors the folder (checker.check_source)
with the queue's rules holding (checker.check) and no raced key deleted
(sync_race.check_sync_races): a final sync then finds everything unchanged. Before the
migration each raced file's document is deleted with its new version: the checker flags
every such delete (`sync_deleted_newer_version`) and the last round's files left without a
document (`source_file_without_document`); a final sync finds them new again, which is why
the history rule is needed (after a final sync the folder's rules cannot see it)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.operations.sync import Pool, SyncOptions, sync_source
from ingestion_pipeline.settings import load_settings
from tests.conftest import Schema
from tests.faults.checker import Report, check, check_source
from tests.faults.harness import WorkerFleet, janitor_pass, open_jobs
from tests.faults.sync_race import MAX_BYTES, Racer, check_sync_races, recreate, run_raced_pass

pytestmark = pytest.mark.one_server

COLLECTION = "races"
FILES = 14
ROUNDS = 3
GONE = 4  # files deleted per round; every other one comes back mid-sync
REWRITTEN = 2
MAX_ATTEMPTS = 3


def write(path: Path, n: int) -> None:
    path.write_text(f"# Note {n}\n\nThe egret waded at {time.time_ns()}.\n")


def drain(url: str, timeout: float = 60) -> None:
    """Until no job is open (quiescence, not an ordering: the workers take what they take)."""
    deadline = time.monotonic() + timeout
    while open_jobs(url):
        assert time.monotonic() < deadline, f"{open_jobs(url)} job(s) still open"
        janitor_pass(url)
        time.sleep(0.3)


def options() -> SyncOptions:
    return SyncOptions(COLLECTION, MAX_BYTES, max_attempts=MAX_ATTEMPTS)


def files_of(folder: Path) -> list[Path]:
    return sorted(path for path in folder.glob("*.txt"))


def one_round(pool: Pool, folder: Path, rng: random.Random, log: Path, gone_before: list[Path]) -> dict[str, Any]:
    present = files_of(folder)
    gone = sorted(rng.sample(present, GONE))
    rewritten = sorted(rng.sample([p for p in present if p not in gone], REWRITTEN))
    for path in gone:
        path.unlink()
    for n, path in enumerate(rewritten):
        write(path, n)
    back = [p for p in gone_before if not p.exists()][:1]  # deleted in an earlier round, now re-created
    for path in back:
        recreate(path)
    assert enqueue_paths(pool, [rewritten[0]], max_bytes=MAX_BYTES, collection=COLLECTION).files[0].outcome == (
        "new_version"
    )
    again = rewritten[1].absolute().as_uri()
    racer = Racer(pool, folder, COLLECTION, lambda keys: keys[::2], MAX_ATTEMPTS, lambda key: key == again)
    report = run_raced_pass(pool, folder, options(), racer, log)
    # The live documents of the files gone (before the fix, one raced in the round before is gone already).
    assert set(racer.candidates) <= {path.absolute().as_uri() for path in gone}, racer.candidates
    assert sorted(racer.raced) == racer.candidates[::2], racer.raced  # each enqueue made a new version
    return {
        "gone": gone,
        "candidates": set(racer.candidates),
        "raced": set(racer.raced),
        "deleted": {key for key, change in report.changes if change == "deleted"},
        "counts": report.counts,
        "back": back,
        "enqueued": racer.enqueued,
    }


def test_syncs_racing_new_versions_and_deletes(sync_deletes_schema: Schema, tmp_path: Path) -> None:
    url, folder, log = sync_deletes_schema.url, tmp_path / "share", tmp_path / "races.jsonl"
    folder.mkdir()
    (tmp_path / "histories").mkdir()
    fleet = WorkerFleet(url, tmp_path / "histories", size=2)
    fleet.start()
    fleet.start()
    rng = random.Random(44)
    try:
        with make_pool(url, load_settings(database_url=url)) as pool:
            for n in range(FILES):
                write(folder / f"f{n:02d}.txt", n)
            assert sync_source(pool, str(folder), options()).counts["new"] == FILES
            drain(url)
            rounds: list[dict[str, Any]] = []
            gone_before: list[Path] = []
            for _ in range(ROUNDS):
                done = one_round(pool, folder, rng, log, gone_before)
                gone_before += [p for p in done["gone"] if p.absolute().as_uri() not in done["raced"]]
                rounds.append(done)
                drain(url)
            janitor_pass(url, final=True)  # the cleanup of the deleted documents' rows, as after a fault run
            report = check(url, fleet.histories())
            check_sync_races(log, report)
            check_source(url, COLLECTION, folder, report)  # at quiescence, before any further sync
            final = sync_source(pool, str(folder), options())
            drain(url)
    finally:
        fleet.stop_all()

    assert all(r["back"] for r in rounds[1:]) and all(r["enqueued"] for r in rounds)
    raced = sum(len(r["raced"]) for r in rounds)
    if not sync_deletes_schema.hardened:  # the bug: each raced file's new version went with its delete
        assert [r["deleted"] for r in rounds] == [r["candidates"] for r in rounds]
        assert raced >= ROUNDS and dict(report.by_rule) == {
            "sync_deleted_newer_version": raced,
            "source_file_without_document": len(rounds[-1]["raced"]),  # earlier ones a later sync found new
        }, report.summary()
        assert final.counts["new"] == len(rounds[-1]["raced"])  # a final sync heals the folder, not the history
        return
    # One rewritten file was enqueued before the sync, which found it unchanged; the other changed.
    assert [r["counts"]["changed"] for r in rounds] == [REWRITTEN - 1] * ROUNDS, [r["counts"] for r in rounds]
    gone_keys = [{p.absolute().as_uri() for p in r["gone"]} for r in rounds]
    assert [r["candidates"] for r in rounds] == gone_keys
    assert [r["deleted"] for r in rounds] == [r["candidates"] - r["raced"] for r in rounds]
    assert not report.violations, report.summary()
    assert raced == ROUNDS * GONE // 2 and report.stats["sync_races"] == {"raced": raced, "raced_deleted": 0}
    assert dict(final.counts) == {"unchanged": len(files_of(folder))}  # nothing was left for it to do
    after = Report()
    check_source(url, COLLECTION, folder, after)
    assert not after.violations, after.summary()
