"""Syncs of a churning folder under the fault harness (issue 32; the soak runs them): a writer
process (tests/faults/churn.py) adds, rewrites and deletes files while `ingest sync` passes,
each a process of its own, run one after another into the collection `churn`; one pass in
KILL_EVERY is SIGKILLed at a random moment, as a sync dies with its machine, and the batch of
one pass in CANCEL_EVERY that queued files is cancelled by the operator at once. Meanwhile
the chaos restarts the server and the operator deletes documents, cancels batches (syncs'
among them) and makes new versions of any key.

A pass ends `ok`, `killed` (by us), `database_unavailable` (the server was restarting),
`batch_cancelled` (the operator cancelled its batch: it stops at the next file),
`churned_mid_read` (it exited 1, the rest of its pass done, because entries failed that the
writer removed or rewrote while the pass ran: a file listed, then gone before it was read;
the writer's log says which files it touched, see `classify`) or `unexpected` (anything
else, an entry failure of a file the writer did not touch among them: the soak fails on it).
After the chaos: the writer stops, one final sync runs with the folder at rest, and the
harness drains; checker.check_source then holds the index against the folder."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from tests.faults.churn import seed

COLLECTION = "churn"
KILL_EVERY = 5
CANCEL_EVERY = 4  # of the passes that queued files: the operator cancels that pass's batch at once
MAX_ATTEMPTS = 10  # as the seeded documents: kills and stalls cost attempts, none may run out
PASS_TIMEOUT = 120
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
EXPECTED_FAILURES = {
    "database unavailable": "database_unavailable",
    "cannot connect to": "database_unavailable",  # the server's socket is gone while it restarts
    "was cancelled": "batch_cancelled",
}
# Why an entry fails when the writer changed its file during the pass: removed between the
# listing and the read (the read's OSError), or grown past the limit after it was listed. A
# rewrite in place is read as it stands (half-written, perhaps) and fails nothing.
MID_READ_REASONS = ("No such file or directory", "it grew over the")
LINE_MAX = 4096  # a log line is shorter: the action under way at an offset starts within this


@dataclass
class SyncStats:
    passes: Counter[str] = field(default_factory=Counter)  # by outcome
    counts: Counter[str] = field(default_factory=Counter)  # new / changed / … of the passes that ran to the end
    unexpected: list[str] = field(default_factory=list)  # a pass's first error line, for each `unexpected`


@dataclass(frozen=True)
class PassEnd:
    outcome: str
    report: dict[str, Any] | None = None  # the pass's --json report, when it reached the end
    error: str | None = None  # what made it `unexpected`


class ChurnLog:
    """The writer's log (churn.py's LOG): one line per action, written before it begins."""

    def __init__(self, path: Path):
        self.path = path

    def offset(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def touched(self, since: int, until: int, *, in_flight: bool) -> set[Path]:
        """The files the writer acted on between the offsets `since` and `until`, and, when the
        writer was running at `since` (`in_flight`), the file of the last action begun before
        it: that one may still have been under way."""
        start = max(0, since - LINE_MAX) if in_flight else since
        try:
            with self.path.open("rb") as log:
                log.seek(start)
                data = log.read(until - start)
        except FileNotFoundError:
            return set()
        lines = data[since - start :].splitlines() + data[: since - start].splitlines()[-1:]
        return {Path(line.decode().split(" ", 1)[1]) for line in lines}


def classify(returncode: int, out: bytes, err: bytes, touched: set[Path]) -> PassEnd:
    """How an `ingest sync --json` pass ended. Exit 1 with a report (the pass reached its end)
    means entries failed: `churned_mid_read` when each failed for a reason a change of its file
    explains (MID_READ_REASONS) and its file is one the writer touched during the pass
    (`touched`), `unexpected` otherwise. Any other failure is judged by the last line of
    stderr (EXPECTED_FAILURES)."""
    if returncode == 0:
        return PassEnd("ok", json.loads(out))
    report = _report(out) if returncode == 1 else None
    if report is not None and report["failures"]:
        for failure in report["failures"]:
            key, reason = failure["source_key"], failure["reason"]
            if not reason.startswith(MID_READ_REASONS) or _path_of(key) not in touched:
                why = "untouched by the writer" if reason.startswith(MID_READ_REASONS) else "not a change of its file"
                return PassEnd("unexpected", report, f"entry failed, {why}: {key}: {reason}")
        return PassEnd("churned_mid_read", report)
    line = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {returncode}"]
    for marker, outcome in EXPECTED_FAILURES.items():
        if marker in line[0]:
            return PassEnd(outcome)
    return PassEnd("unexpected", error=line[0])


def _report(out: bytes) -> dict[str, Any] | None:
    try:
        report = json.loads(out)
    except ValueError:
        return None
    return report if isinstance(report, dict) and "failures" in report else None


def _path_of(key: str) -> Path | None:
    parts = urlsplit(key)
    return Path(url2pathname(parts.path)) if parts.scheme == "file" else None


class SyncLoop:
    def __init__(self, url: str, folder: Path, seed_value: int, cancel: Callable[[str], None] | None = None):
        self.url, self.folder, self.cancel = url, folder, cancel
        self.share, self.stop_file = folder / "share", folder / "churn.stop"
        self.log = ChurnLog(folder / "churn.log")
        self.rng = random.Random(seed_value)
        self.stats = SyncStats()
        self._stopping = threading.Event()
        self._queued_passes = 0
        self._writer: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._loop, name="sync-loop", daemon=True)

    def start(self) -> None:
        seed(self.share, self.rng)
        self._writer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.faults.churn",
                str(self.share),
                str(self.stop_file),
                str(self.rng.randrange(1 << 30)),
                str(self.log.path),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self._thread.start()

    def settle(self, tries: int = 5) -> str:
        """Stop the passes and the writer, then sync the folder at rest until a pass ends ok
        (the chaos is over, so the first should); the outcome of the last try."""
        self.stop()
        outcome = "not run"
        for _ in range(tries):
            outcome = self.run_pass(kill_after=None)
            if outcome == "ok":
                break
        self.stats.passes[f"final {outcome}"] += 1
        return outcome

    def stop(self) -> None:
        """Stop the passes (the one under way ends) and the writer; idempotent."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=PASS_TIMEOUT + 10)
        self.stop_file.touch()
        if self._writer is not None:
            self._writer.wait(timeout=30)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            kill_after = self.rng.uniform(0.5, 3.0) if self.rng.randrange(KILL_EVERY) == 0 else None
            self.stats.passes[self.run_pass(kill_after)] += 1

    def _maybe_cancel(self, report: dict[str, Any]) -> None:
        """Every CANCEL_EVERY-th pass that queued files has its batch cancelled while those
        are being built: the files that stay as they are must come back `requeued`."""
        queued = sum(report["counts"][change] for change in ("new", "changed", "requeued"))
        if self.cancel is None or self._stopping.is_set() or not queued:
            return
        self._queued_passes += 1
        if self._queued_passes % CANCEL_EVERY == 0:
            self.cancel(report["batch_id"])

    def run_pass(self, kill_after: float | None) -> str:
        command = [str(BIN / "ingest"), "sync", str(self.share), "--collection", COLLECTION, "--json"]
        env = {**os.environ, "DATABASE_URL": self.url, "INGEST_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}
        in_flight = self._writer is not None and self._writer.poll() is None
        since = self.log.offset()
        with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            try:
                out, err = proc.communicate(timeout=kill_after if kill_after is not None else PASS_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.communicate()
                if kill_after is None:
                    self.stats.unexpected.append(f"a pass took over {PASS_TIMEOUT} s")
                    return "unexpected"
                return "killed"
        touched = self.log.touched(since, self.log.offset(), in_flight=in_flight) if proc.returncode == 1 else set()
        end = classify(proc.returncode, out, err, touched)
        if end.outcome in ("ok", "churned_mid_read") and end.report is not None:
            self.stats.counts.update({k: v for k, v in end.report["counts"].items() if v})
            self._maybe_cancel(end.report)
        if end.error is not None:
            self.stats.unexpected.append(end.error)
        return end.outcome
