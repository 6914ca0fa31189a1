"""Progress bars on standard error when it is a terminal (tqdm): done of a total, the rate
and the time left, and what failed so far. `--json` and a redirected stderr draw none."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tqdm import tqdm

from ingestion_pipeline.worker import JobResult, Outcome

if TYPE_CHECKING:
    from ingestion_pipeline.db.rpc import IngestionRpc

# How often `ingest work` reads the queue's size again (one cheap RPC): a total that follows
# what is enqueued meanwhile, without a call per job.
REFRESH_SECONDS = 2.0
FINISHED = (Outcome.COMPLETED.value, Outcome.FAILED.value)


def drawn(as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty()


def bar(desc: str, unit: str, *, draw: bool, total: int | None = None) -> tqdm:
    return tqdm(desc=desc, unit=unit, total=total, disable=not draw, file=sys.stderr, dynamic_ncols=True)


class WorkProgress:
    """`ingest work`'s bar: documents finished (completed or failed) of the queue's open jobs.

    The total is finished + still open (pending now or later, processing), read through
    rpc_sensor_state when the bar starts and again at most every `refresh_seconds` as
    results come in: it grows when more is enqueued meanwhile, and shrinks when other
    workers take jobs. A retried job is not finished: it is open again. The failures so far
    are shown beside the rate (`failed=2, retried=1`)."""

    def __init__(
        self,
        rpc: IngestionRpc,
        *,
        draw: bool,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.rpc, self.draw, self.refresh_seconds, self.clock = rpc, draw, refresh_seconds, clock
        self.outcomes: Counter[str] = Counter()
        self.totals: list[int] = []  # every total the bar showed (the tests read them)
        self.bar = bar("work", "doc", draw=draw)
        self._refreshed = float("-inf")
        if draw:
            self.refresh_total()

    @property
    def finished(self) -> int:
        return sum(self.outcomes[o] for o in FINISHED)

    def refresh_total(self) -> None:
        state = self.rpc.sensor_state(limit=1)
        # A job whose lease went stale (its worker died) is in claimable and in processing:
        # counted twice until it is reclaimed, which is rare and soon over.
        self.bar.total = self.finished + state.claimable + state.pending_later + state.processing
        self.totals.append(self.bar.total)
        self._refreshed = self.clock()

    def __call__(self, result: JobResult) -> None:
        self.outcomes[result.outcome.value] += 1
        if not self.draw:
            return
        if self.clock() - self._refreshed >= self.refresh_seconds:
            self.refresh_total()
        self.bar.set_postfix_str(failures(self.outcomes), refresh=False)
        self.bar.n = self.finished
        self.bar.refresh()

    def close(self) -> None:
        if self.draw:
            self.refresh_total()  # every result is acknowledged by now: the last line is exact
            self.bar.n = self.finished
            self.bar.set_postfix_str(failures(self.outcomes), refresh=False)
        self.bar.close()


def sync_postfix(counts: Mapping[str, int]) -> str:
    """`new=3, changed=1, failed=0`: what a sync did with the files listed so far."""
    names = ("new", "changed", "requeued", "retried")
    shown = [f"{name}={counts[name]}" for name in names if counts.get(name)]
    return ", ".join([*shown, f"failed={counts.get('failed', 0)}"])


def failures(outcomes: Mapping[str, int]) -> str:
    """`failed=2, retried=1` (each only when it occurred; `failed=0` when nothing did)."""
    names = ("failed", "retried", "released", "abandoned")
    shown = [f"{name}={outcomes[name]}" for name in names if outcomes.get(name)]
    return ", ".join(shown) or "failed=0"
