"""A client for every schema generation, for the tests that drive schemas older than the
production client's support window.

The production client (`IngestionRpc`) speaks this release's schema and the previous
release's (ingestion_pipeline/db/schema_level.py) and refuses older ones. The race tests
must still observe each bug on the schema just before its fix, so this subclass adds, in
plain SQL (tests/sql/old_call_forms.sql), the call forms of the generations before the
window, chosen by a catalog look-up the way the clients of those releases chose them:
worker-id fences before the lease tokens, unfenced calls (results `fenced=False`) before
the hardening, one call per job before the bulk acknowledgement, stage rows written by a
call each before they rode the acknowledgement, and the retry delay added to this
machine's clock before the server computed it. On a schema in the window it is exactly the
production client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from pathlib import Path
from typing import Any

from ingestion_pipeline.db.models import (
    BatchesRefreshed,
    CommitResult,
    CompleteItem,
    ExpireResult,
    FailItem,
    HeartbeatsResult,
    JobOutcome,
    LeaseBeat,
    LeaseRef,
)
from ingestion_pipeline.db.queries import named_statements
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.acks import MAX_ACK_ITEMS

OLD_SQL = named_statements((Path(__file__).parent / "sql" / "old_call_forms.sql").read_text(), "old_call_forms.sql")


class FenceLevel(IntEnum):
    NONE = 0  # before the hardening migration: no heartbeat, no stage log, state RPCs unfenced
    WORKER_ID = 1  # fenced by the lease holder's worker id
    LEASE_TOKEN = 2  # fenced by a per-claim token; commit and complete in one transaction
    SERVER_RETRY_DELAY = 3  # fail_or_retry takes the delay; the server adds it to its clock
    BULK_ACK = 4  # O(1) batch counters; many jobs acknowledged in one statement
    STAGES_IN_ACKS = 5  # stage rows ride the acknowledgement (the previous release)
    ONE_LOCK_ORDER = 6  # one lock order (this release's first migration)
    DOCUMENT_VERSIONS = 7  # documents keyed by source, with versions (this release)


# Production query -> its form by level; a level not listed takes the highest listed one
# below it, and a level above every listed one the production query. None: no such RPC.
FORMS: dict[str, dict[FenceLevel, str | None]] = {
    "rpc_heartbeat": {FenceLevel.NONE: None, FenceLevel.WORKER_ID: "rpc_heartbeat_worker_id"},
    "rpc_record_stage": {FenceLevel.NONE: None, FenceLevel.WORKER_ID: "rpc_record_stage_worker_id"},
    "rpc_begin_generation": {FenceLevel.NONE: "rpc_begin_generation_worker_id"},
    "rpc_commit_generation": {
        FenceLevel.NONE: "rpc_commit_generation_legacy",
        FenceLevel.WORKER_ID: "rpc_commit_generation_worker_id",
    },
    "rpc_complete": {FenceLevel.NONE: "rpc_complete_legacy", FenceLevel.WORKER_ID: "rpc_complete_worker_id"},
    "rpc_fail_or_retry": {
        FenceLevel.NONE: "rpc_fail_or_retry_legacy",
        FenceLevel.WORKER_ID: "rpc_fail_or_retry_worker_id",
        FenceLevel.LEASE_TOKEN: "rpc_fail_or_retry_lease_token",
    },
}
# The level from which each listed query is the production one.
SINCE = {
    "rpc_heartbeat": FenceLevel.LEASE_TOKEN,
    "rpc_record_stage": FenceLevel.LEASE_TOKEN,
    "rpc_begin_generation": FenceLevel.LEASE_TOKEN,
    "rpc_commit_generation": FenceLevel.LEASE_TOKEN,
    "rpc_complete": FenceLevel.LEASE_TOKEN,
    "rpc_fail_or_retry": FenceLevel.SERVER_RETRY_DELAY,
}


def form_for(name: str, level: FenceLevel) -> str | None:
    """The query to send for the production query `name` at `level`."""
    if name not in FORMS or level >= SINCE[name]:
        return name
    forms = FORMS[name]
    return forms[max(known for known in forms if known <= level)]


def _parts(items: Sequence) -> list[Sequence]:
    return [items[start : start + MAX_ACK_ITEMS] for start in range(0, len(items), MAX_ACK_ITEMS)]


class AnySchemaRpc(IngestionRpc):
    """IngestionRpc plus the call forms of the schemas before its support window."""

    _level: FenceLevel | None = None

    @property
    def fence_level(self) -> FenceLevel:
        if self._level is None:
            with self._connection() as conn:
                self._level = FenceLevel(conn.execute(OLD_SQL["rpc_fence_level"]).fetchone()["level"])
        return self._level

    @property
    def has_versions(self) -> bool:
        """Whether documents are keyed by source, with versions (…_document_versions.sql)."""
        return self.fence_level >= FenceLevel.DOCUMENT_VERSIONS

    @property
    def in_window(self) -> bool:
        return self.fence_level >= FenceLevel.STAGES_IN_ACKS

    def require_supported_schema(self) -> None:
        if self.in_window:
            super().require_supported_schema()

    def _state_call(self, model, name, params):
        level = self.fence_level
        form = form_for(name, level)
        if form == name:
            return super()._state_call(model, name, params)
        if form is None:  # the RPC does not exist yet: a no-op, as it was
            return model(ok=True, fenced=False)
        result = self._result(model, form, params)
        return result if level > FenceLevel.NONE else result.model_copy(update={"fenced": False})

    def _value(self, name, params):
        if name not in OLD_SQL:
            return super()._value(name, params)
        with self._connection() as conn:
            row = conn.execute(OLD_SQL[name], params).fetchone()
        return row["result"]

    # -- what the older clients did differently ------------------------------------------

    def commit_and_complete(
        self, job_id, document_id, generation_id, *, worker_id, lease_token, metadata=None, batch_id=None
    ) -> CommitResult:
        """Before the lease tokens (or without a token): the two calls of those releases;
        `committed` says whether the first one went through."""
        if self.fence_level >= FenceLevel.LEASE_TOKEN and lease_token is not None:
            return super().commit_and_complete(
                job_id,
                document_id,
                generation_id,
                worker_id=worker_id,
                lease_token=lease_token,
                metadata=metadata,
                batch_id=batch_id,
            )
        committed = self.commit_generation(
            job_id, document_id, generation_id, worker_id, metadata, lease_token=lease_token
        )
        if not committed.ok:
            return CommitResult.model_validate(committed.model_dump())
        completed = self.complete(job_id, document_id, worker_id=worker_id, lease_token=lease_token, batch_id=batch_id)
        return CommitResult.model_validate({**committed.model_dump(), **completed.model_dump(), "committed": True})

    def fail_or_retry(self, job_id, document_id, *, retry_delay_seconds=None, next_run_at=None, **kwargs) -> JobOutcome:
        if retry_delay_seconds is not None and next_run_at is None and self.fence_level < FenceLevel.SERVER_RETRY_DELAY:
            next_run_at = datetime.now(UTC) + timedelta(seconds=retry_delay_seconds)
        return super().fail_or_retry(
            job_id, document_id, retry_delay_seconds=retry_delay_seconds, next_run_at=next_run_at, **kwargs
        )

    def _bulk(self, items: Sequence[CompleteItem | FailItem | LeaseBeat]) -> bool:
        return self.fence_level >= FenceLevel.BULK_ACK and all(item.lease_token is not None for item in items)

    def _stages_apart(self, worker_id: str, items: Sequence, lost: type, send) -> list:
        """Before stage rows rode the acknowledgement each was a fenced call of its own: here
        they are written just before their job's acknowledgement, in order, and the item goes
        without them. An item whose row is refused (the lease is gone) is answered lease_lost
        and not sent, as the worker of those releases stopped at that row."""
        answers: dict[int, Any] = {}
        to_send: list[tuple[int, Any]] = []
        for position, item in enumerate(items):
            if any(not self._stage_row_written(worker_id, item, row) for row in item.stages):
                answers[position] = lost(ok=False, reason="lease_lost", job_id=item.job_id)
            else:
                to_send.append((position, dataclasses.replace(item, stages=())))
        sent = send([item for _, item in to_send]) if to_send else []
        answers.update({position: answer for (position, _), answer in zip(to_send, sent, strict=True)})
        return [answers[position] for position in range(len(items))]

    def _stage_row_written(self, worker_id: str, item: CompleteItem | FailItem, row) -> bool:
        return not self.record_stage(
            item.job_id,
            item.worker_id or worker_id,
            row.stage,
            started_at=row.started_at,
            finished_at=row.finished_at,
            detail=row.detail,
            lease_token=item.lease_token,
        ).lease_lost

    def complete_many(self, worker_id: str, items: Sequence[CompleteItem]) -> list[CommitResult]:
        if self.in_window or not items:
            return super().complete_many(worker_id, items)
        return self._stages_apart(worker_id, items, CommitResult, lambda sent: self._complete_old(worker_id, sent))

    def _complete_old(self, worker_id: str, items: Sequence[CompleteItem]) -> list[CommitResult]:
        if self._bulk(items):
            return [result for part in _parts(items) for result in self._complete_part(part)]
        return [self._complete_one(worker_id, item) for item in items]

    def _complete_one(self, worker_id: str, item: CompleteItem) -> CommitResult:
        if item.generation_id is not None:
            done = self.commit_and_complete(
                item.job_id,
                item.document_id,
                item.generation_id,
                worker_id=worker_id,
                lease_token=item.lease_token,
                metadata=item.metadata,
                batch_id=item.batch_id,
            )
            return done if done.committed is not None else done.model_copy(update={"committed": done.ok})
        completed = self.complete(
            item.job_id,
            item.document_id,
            worker_id=worker_id,
            lease_token=item.lease_token,
            batch_id=item.batch_id,
            stage=item.stage,
        )
        return CommitResult.model_validate({**completed.model_dump(), "job_id": item.job_id, "committed": False})

    def fail_or_retry_many(self, worker_id: str, items: Sequence[FailItem]) -> list[JobOutcome]:
        if self.in_window or not items:
            return super().fail_or_retry_many(worker_id, items)
        return self._stages_apart(worker_id, items, JobOutcome, lambda sent: self._fail_old(worker_id, sent))

    def _fail_old(self, worker_id: str, items: Sequence[FailItem]) -> list[JobOutcome]:
        if self._bulk(items):
            return [result for part in _parts(items) for result in self._fail_part(part)]
        return [
            self.fail_or_retry(
                i.job_id,
                i.document_id,
                worker_id=worker_id,
                lease_token=i.lease_token,
                retry=i.retry,
                error_message=i.error_message,
                batch_id=i.batch_id,
                document_status=i.document_status,
                stage=i.stage,
                retry_delay_seconds=i.retry_delay_seconds,
            )
            for i in items
        ]

    def heartbeat_many(self, worker_id: str, leases: Sequence[LeaseBeat]) -> HeartbeatsResult:
        if not leases or self._bulk(leases):
            return super().heartbeat_many(worker_id, leases)
        answers = [
            (
                lease,
                self.heartbeat(
                    lease.job_id, worker_id, lease_token=lease.lease_token, progress=lease.progress, stage=lease.stage
                ),
            )
            for lease in leases
        ]
        return HeartbeatsResult(
            ok=True,
            renewed=sum(answer.ok for _, answer in answers),
            lost=[
                LeaseRef(job_id=lease.job_id, lease_token=lease.lease_token)
                for lease, answer in answers
                if answer.lease_lost
            ],
            fenced=all(answer.fenced for _, answer in answers),
        )

    def refresh_drifted_batches(self, *, limit: int = 100) -> BatchesRefreshed:
        """None before the batch counters (every transition recounted its batch)."""
        if self.fence_level < FenceLevel.BULK_ACK:
            return BatchesRefreshed(ok=True)
        return super().refresh_drifted_batches(limit=limit)

    def expire_stale(self, stale_after_seconds: int | None = None) -> ExpireResult:
        """None before the hardening: the claim loop of that release had none to call."""
        if self.fence_level is FenceLevel.NONE:
            return ExpireResult(ok=True)
        return super().expire_stale(stale_after_seconds)


__all__ = ["AnySchemaRpc", "FenceLevel"]
