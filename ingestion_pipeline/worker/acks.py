"""Buffered acknowledgement: jobs that finish close together are completed (or failed) in
one statement (IngestionRpc.complete_many / fail_or_retry_many).

A job's thread hands its acknowledgement over and waits for its own answer. The buffer is
sent as soon as every job in flight is waiting in it (waiting longer gains nothing), when
it holds `max_items`, or `max_delay` after the oldest item came in; the thread whose
condition fires sends it, so there is no extra thread. With one job in flight an
acknowledgement goes out at once; with many short jobs, one statement acknowledges them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ingestion_pipeline.db.models import CommitResult, CompleteItem, FailItem, JobOutcome, RpcResult
from ingestion_pipeline.db.rpc import IngestionRpc


@dataclass
class _Ack:
    item: CompleteItem | FailItem
    queued_at: float = field(default_factory=time.monotonic)
    answer: RpcResult | None = None
    error: BaseException | None = None
    sending: bool = False  # taken into a statement by some thread
    done: bool = False


class AckBuffer:
    def __init__(self, rpc: IngestionRpc, worker_id: str, *, max_delay: float, max_items: int):
        self._rpc = rpc
        self._worker_id = worker_id
        self._max_delay = max_delay
        self._max_items = max_items
        self._cond = threading.Condition()
        self._pending: list[_Ack] = []
        self._in_flight = 0  # jobs that may still acknowledge (claimed, not yet finished)
        self._sending = 0  # of those, jobs whose acknowledgement is being sent now

    def job_started(self) -> None:
        with self._cond:
            self._in_flight += 1

    def job_finished(self) -> None:
        """The job's thread is done (acknowledged, or ended without an acknowledgement:
        lease lost). Waiting acknowledgements may now be all that is left in flight."""
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    # An item's answer is the one its kind's bulk call gives (complete_many, fail_or_retry_many).

    def complete(self, item: CompleteItem) -> CommitResult:
        return cast(CommitResult, self._submit(item))

    def fail(self, item: FailItem) -> JobOutcome:
        return cast(JobOutcome, self._submit(item))

    def _submit(self, item: CompleteItem | FailItem) -> RpcResult | None:
        ack, batch = _Ack(item), None
        with self._cond:
            self._pending.append(ack)  # no wake-up: this thread checks the send conditions itself
            while not ack.sending:  # ours is pending, so the buffer is not empty
                if self._ready():
                    batch, self._pending = self._pending, []
                    for taken in batch:
                        taken.sending = True
                    self._sending += len(batch)
                    break
                self._cond.wait(max(self._pending[0].queued_at + self._max_delay - time.monotonic(), 0.0005))
            while batch is None and not ack.done:  # another thread sends ours: wait for the answer
                self._cond.wait()
        if batch is not None:
            self._send(batch)
        if ack.error is not None:
            raise ack.error
        return ack.answer

    def _ready(self) -> bool:
        everyone_waiting = len(self._pending) >= self._in_flight - self._sending
        oldest_due = time.monotonic() >= self._pending[0].queued_at + self._max_delay
        return everyone_waiting or oldest_due or len(self._pending) >= self._max_items

    def _send(self, batch: list[_Ack]) -> None:
        completions = [a for a in batch if isinstance(a.item, CompleteItem)]
        failures = [a for a in batch if isinstance(a.item, FailItem)]
        sends: tuple[tuple[list[_Ack], Callable[[str, Any], Sequence[RpcResult]]], ...] = (
            (completions, self._rpc.complete_many),
            (failures, self._rpc.fail_or_retry_many),
        )
        try:
            for acks, send in sends:
                if not acks:
                    continue
                try:
                    answers = send(self._worker_id, [a.item for a in acks])
                    for ack, answer in zip(acks, answers, strict=True):
                        ack.answer = answer
                except Exception as exc:  # noqa: BLE001 - each job decides what the error means for it
                    for ack in acks:
                        ack.error = exc
        finally:  # whatever happened, no job thread is left waiting for its answer
            with self._cond:
                for ack in batch:
                    if ack.answer is None and ack.error is None:
                        ack.error = RuntimeError("the acknowledgement was interrupted")
                    ack.done = True
                self._sending -= len(batch)
                self._cond.notify_all()
