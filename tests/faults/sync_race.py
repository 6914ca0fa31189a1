"""Syncs racing new versions of the files they find vanished (issue 44): a sync reads the live
keys its listing did not hold, then deletes them one transaction at a time; a file that comes
back in between (re-created with new bytes and enqueued as `ingest enqueue` does) has a newer
version than the one the sync read, and its delete must be refused (`version_changed`,
migration 20261204000200): the file is in its folder, so its document must stay live.

`Racer` gives a pass of `sync_source` the hooks that force that race: `on_entry` collects the
listing (and, when asked, enqueues a listed file again, as a user's `ingest enqueue` of the
same folder would), and `keep_lease`, at the pass's first delete (its vanished keys are read by
then), re-creates and enqueues the vanished files `choose` picks. Each pass appends one line to
a log: the keys raced with the version their enqueue returned, and the keys the pass deleted.
`check_sync_races` reads that log: a raced key the same pass deleted is
`sync_deleted_newer_version` (its delete began after the enqueue of the newer version had
returned, so it carried an older version than the document's latest).

`RaceLoop` runs such passes one after another in the fault soak, in-process (its hooks need
the sync's callbacks), beside sync_loop.SyncLoop's `ingest sync` processes and the churn
writer, on the same folder and collection."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg_pool import PoolTimeout

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import BatchWasCancelled, DatabaseUnavailable
from ingestion_pipeline.operations.enqueue import EnqueueRefused, enqueue_paths
from ingestion_pipeline.operations.sync import Pool, SyncOptions, SyncReport, sync_source
from ingestion_pipeline.settings import load_settings
from tests.faults.checker import Report

MAX_BYTES = 100_000
RACE_SHARE = 0.5  # of the vanished files, those a pass re-creates between its key read and its deletes
RACED_AT_MOST = 3  # per pass: the soak's folder has tens of files, a few suffice
ENQUEUE_SHARE = 0.04  # of the listed files, those enqueued again while the listing runs


def recreate(path: Path) -> None:
    """New bytes (a time in them: never a version's bytes before)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Back\n\nThe heron came back at {time.time_ns()}.\n")


def path_of_key(key: str) -> Path:
    return Path(key.removeprefix("file://"))


@dataclass
class Racer:
    """The hooks of one sync pass of `folder` into `collection` (see the module's doc)."""

    pool: Pool
    folder: Path
    collection: str
    choose: Callable[[list[str]], list[str]]  # the vanished keys to re-create, from the sorted candidates
    max_attempts: int = 3
    enqueue_listed: Callable[[str], bool] = lambda key: False  # enqueue this listed file again now?
    listed: set[str] = field(default_factory=set)
    candidates: list[str] = field(default_factory=list)  # the live keys the listing did not hold, at the race
    raced: dict[str, int] = field(default_factory=dict)  # key -> the version its enqueue returned
    enqueued: Counter[str] = field(default_factory=Counter)  # outcomes of every enqueue of ours
    _deletes: int = -1  # -1: the listing runs; then the keep_lease calls seen since its last one

    def on_entry(self, key: str, counts: Counter[str]) -> None:
        self.listed.add(key)
        if self.enqueue_listed(key):
            self._enqueue(path_of_key(key))

    def keep_lease(self, before_deletes: bool) -> None:
        if before_deletes:
            self._deletes = 0
        elif self._deletes >= 0:
            self._deletes += 1
            if self._deletes == 1:  # the first delete's turn: the pass has read its vanished keys
                self._race()

    def _race(self) -> None:
        rpc = IngestionRpc(self.pool)
        prefix = self.folder.absolute().as_uri() + "/"
        # A superset of the pass's vanished keys (it read those enqueued before it began): a
        # key it will not delete costs an enqueue and nothing else.
        live = rpc.live_keys_under(self.collection, prefix, before=rpc.database_now(), limit=100_000)
        self.candidates = sorted(item.source_key for item in live if item.source_key not in self.listed)
        for key in self.choose(self.candidates):
            recreate(path_of_key(key))
            answer = self._enqueue(path_of_key(key))
            if answer is not None and answer[0] == "new_version" and answer[1] is not None:
                self.raced[key] = answer[1]

    def _enqueue(self, path: Path) -> tuple[str, int | None] | None:
        """`ingest enqueue PATH` in-process; None when it could not (gone, or its batch cancelled)."""
        try:
            report = enqueue_paths(
                self.pool, [path], max_bytes=MAX_BYTES, collection=self.collection, max_attempts=self.max_attempts
            )
        except (EnqueueRefused, OSError):  # the churn writer deleted it, or an operator cancelled the batch
            self.enqueued["refused"] += 1
            return None
        [done] = report.files
        self.enqueued[done.outcome] += 1
        return done.outcome, done.version

    def log(self, path: Path, report: SyncReport) -> None:
        deleted = [key for key, change in report.changes if change == "deleted"]
        with path.open("a") as out:
            out.write(json.dumps({"raced": self.raced, "deleted": deleted}) + "\n")


def run_raced_pass(pool: Pool, folder: Path, options: SyncOptions, racer: Racer, log: Path) -> SyncReport:
    report = sync_source(pool, str(folder), options, on_entry=racer.on_entry, keep_lease=racer.keep_lease)
    racer.log(log, report)
    return report


def check_sync_races(log: Path, report: Report) -> None:
    """sync_deleted_newer_version: a pass deleted a key whose newer version was enqueued (and
    returned) after the pass read its vanished keys and before its deletes."""
    raced = deleted = 0
    for line in log.read_text().splitlines() if log.exists() else ():
        sync_pass = json.loads(line)
        raced += len(sync_pass["raced"])
        for key in sorted(set(sync_pass["raced"]) & set(sync_pass["deleted"])):
            deleted += 1
            report.flag(
                "sync_deleted_newer_version",
                f"sync_deleted_newer_version: {key} was deleted by a sync after its version "
                f"{sync_pass['raced'][key]} was enqueued",
            )
    report.stats["sync_races"] = {"raced": raced, "raced_deleted": deleted}


@dataclass
class RaceStats:
    passes: Counter[str] = field(default_factory=Counter)  # by outcome, as sync_loop.SyncStats
    counts: Counter[str] = field(default_factory=Counter)  # new / changed / … of the passes that ended ok
    enqueued: Counter[str] = field(default_factory=Counter)  # our enqueues' outcomes
    raced: int = 0  # files re-created and enqueued between a pass's key read and its deletes
    unexpected: list[str] = field(default_factory=list)


class RaceLoop:
    """Raced passes over the soak's churned folder until stopped (a thread)."""

    def __init__(self, url: str, folder: Path, collection: str, log: Path, seed: int, max_attempts: int):
        self.url, self.folder, self.collection, self.log = url, folder, collection, log
        self.rng, self.max_attempts = random.Random(seed), max_attempts
        self.stats = RaceStats()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sync-race", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=180)

    def _loop(self) -> None:
        settings = load_settings(database_url=self.url)
        with make_pool(self.url, settings) as pool:
            while not self._stopping.is_set():
                self.stats.passes[self._pass(pool)] += 1
                self._stopping.wait(self.rng.uniform(0.1, 0.5))

    def _choose(self, candidates: list[str]) -> list[str]:
        return [key for key in candidates if self.rng.random() < RACE_SHARE][:RACED_AT_MOST]

    def _pass(self, pool: Pool) -> str:
        racer = Racer(
            pool,
            self.folder,
            self.collection,
            self._choose,
            self.max_attempts,
            enqueue_listed=lambda key: self.rng.random() < ENQUEUE_SHARE,
        )
        options = SyncOptions(self.collection, MAX_BYTES, max_attempts=self.max_attempts)
        try:
            report = run_raced_pass(pool, self.folder, options, racer, self.log)
            self.stats.counts.update({k: v for k, v in report.counts.items() if v})
            outcome = "ok"
        except BatchWasCancelled:  # the operator cancels syncs' batches too
            outcome = "batch_cancelled"
        except (DatabaseUnavailable, psycopg.OperationalError, PoolTimeout):  # the server restarts
            outcome = "database_unavailable"
        except Exception as exc:  # noqa: BLE001 - recorded: the soak fails on it
            self.stats.unexpected.append(f"{type(exc).__name__}: {exc}")
            outcome = "unexpected"
        self.stats.enqueued.update(racer.enqueued)
        self.stats.raced += len(racer.raced)
        return outcome
