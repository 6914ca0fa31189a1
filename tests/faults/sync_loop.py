"""Syncs of a churning folder under the fault harness (issue 32; the soak runs them): a writer
process (tests/faults/churn.py) adds, rewrites and deletes files while `ingest sync` passes,
each a process of its own, run one after another into the collection `churn`; one pass in
KILL_EVERY is SIGKILLed at a random moment, as a sync dies with its machine, and the batch of
one pass in CANCEL_EVERY that queued files is cancelled by the operator at once. Meanwhile
the chaos restarts the server and the operator deletes documents, cancels batches (syncs'
among them) and makes new versions of any key.

A pass ends `ok`, `killed` (by us), `database_unavailable` (the server was restarting),
`batch_cancelled` (the operator cancelled its batch: it stops at the next file) or
`unexpected` (anything else: the soak fails on it). After the chaos: the writer stops, one
final sync runs with the folder at rest, and the harness drains; checker.check_source then
holds the index against the folder."""

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


@dataclass
class SyncStats:
    passes: Counter = field(default_factory=Counter)  # by outcome
    counts: Counter = field(default_factory=Counter)  # new / changed / … summed over the passes that ended ok
    unexpected: list[str] = field(default_factory=list)  # a pass's first error line, for each `unexpected`


class SyncLoop:
    def __init__(self, url: str, folder: Path, seed_value: int, cancel: Callable[[str], None] | None = None):
        self.url, self.folder, self.cancel = url, folder, cancel
        self.share, self.stop_file = folder / "share", folder / "churn.stop"
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

    def _maybe_cancel(self, report: dict) -> None:
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
        if proc.returncode == 0:
            report = json.loads(out)
            self.stats.counts.update({k: v for k, v in report["counts"].items() if v})
            self._maybe_cancel(report)
            return "ok"
        line = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        for marker, outcome in EXPECTED_FAILURES.items():
            if marker in line[0]:
                return outcome
        self.stats.unexpected.append(line[0])
        return "unexpected"
