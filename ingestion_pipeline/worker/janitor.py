"""The janitor's passes, shared by the Dagster janitor job and `ingest janitor`:

1. dead-letter stale leases whose attempts are exhausted (a worker that died on its final
   attempt: no claim can take the job again) and refresh their batches;
2. recount batches left `pending`/`processing` although none of their jobs is open, and
   batches whose counters disagree with their jobs (the counters' repair path);
3. delete the rows of abandoned and superseded generations, and the bytes of deleted
   documents, in bounded passes (a dry-run count first), within a time budget. The "no
   open job for this document" guard is re-asserted by the database inside every delete;
4. delete older versions' kept bytes beyond INGEST_KEEP_VERSIONS, and those of deleted
   documents, in bounded passes within what is left of the budget;
5. fold the search term counts' delta rows (every commit appends some) into one row per
   lexeme, in bounded passes within what is left of the budget: search reads fewer rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ingestion_pipeline.db.rpc import IngestionRpc

CLEANUP_COUNTS = ("documents", "pages", "sections", "chunks", "generations", "sources")
# Lexemes whose delta rows one compaction folds (a statement of a few hundred ms at most).
TERMS_PER_PASS = 10_000


def cleanup_abandoned_generations(
    rpc: IngestionRpc, *, batch_size: int, time_budget_seconds: float, clock: Callable[[], float] = time.monotonic
) -> dict[str, int]:
    deadline = clock() + time_budget_seconds
    totals = {"passes": 0, **{key: 0 for key in CLEANUP_COUNTS}}
    while clock() < deadline:
        # A candidate may hold no generation at all: a document deleted before its build began
        # leaves only its bytes.
        planned = rpc.cleanup_generations(limit=batch_size, dry_run=True)
        if planned.documents == 0:
            break
        done = rpc.cleanup_generations(limit=batch_size, dry_run=False)
        totals["passes"] += 1
        for key in CLEANUP_COUNTS:
            totals[key] += getattr(done, key)
        if done.generations == 0 and done.sources == 0:  # candidates gained an open job meanwhile: stop
            break
    return totals


def cleanup_kept_bytes(
    rpc: IngestionRpc,
    *,
    keep_versions: int,
    batch_size: int,
    time_budget_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, int]:
    """Older versions' bytes owed (beyond `keep_versions`, or of deleted documents), at most
    `batch_size` versions a pass, until none is owed or the budget is spent."""
    return _passes(
        lambda: rpc.cleanup_kept_bytes(keep_versions=keep_versions, limit=batch_size, dry_run=False),
        ("versions", "bytes"),
        time_budget_seconds=time_budget_seconds,
        clock=clock,
    )


def compact_search_terms(
    rpc: IngestionRpc, *, batch_size: int, time_budget_seconds: float, clock: Callable[[], float] = time.monotonic
) -> dict[str, int]:
    """Passes of at most `batch_size` lexemes each until no lexeme has more than one row or
    the budget is spent."""
    return _passes(
        lambda: rpc.compact_search_terms(limit=batch_size),
        ("removed", "written"),
        time_budget_seconds=time_budget_seconds,
        clock=clock,
    )


def _passes(
    one_pass: Callable[[], Any], counts: tuple[str, ...], *, time_budget_seconds: float, clock: Callable[[], float]
) -> dict[str, int]:
    """`one_pass` again until it does nothing (its first count is 0) or the budget is spent;
    the passes that did something, and their counts summed."""
    deadline = clock() + time_budget_seconds
    totals = {"passes": 0, **dict.fromkeys(counts, 0)}
    while clock() < deadline:
        done = one_pass()
        if getattr(done, counts[0]) == 0:
            break
        totals["passes"] += 1
        for key in counts:
            totals[key] += getattr(done, key)
    return totals


def run_janitor(
    rpc: IngestionRpc, *, batch_size: int, time_budget_seconds: float, keep_versions: int = 1
) -> dict[str, Any]:
    """Every pass in order; what each did. The cleanups and the compaction share the time budget."""
    started = time.monotonic()
    expired = rpc.expire_stale()
    refreshed = rpc.refresh_stuck_batches()
    drifted = rpc.refresh_drifted_batches()
    cleaned = cleanup_abandoned_generations(rpc, batch_size=batch_size, time_budget_seconds=time_budget_seconds)
    left = max(time_budget_seconds - (time.monotonic() - started), 0.0)
    kept = cleanup_kept_bytes(rpc, keep_versions=keep_versions, batch_size=batch_size, time_budget_seconds=left)
    left = max(time_budget_seconds - (time.monotonic() - started), 0.0)
    terms = compact_search_terms(rpc, batch_size=TERMS_PER_PASS, time_budget_seconds=left)
    return {
        "expired": expired.expired,
        "expired_job_ids": [str(j) for j in expired.job_ids],
        "refreshed_batches": refreshed.refreshed,
        "drifted_batches": drifted.refreshed,
        "cleanup": cleaned,
        "kept_bytes": kept,
        "search_terms": terms,
    }
