"""The checks on the schema and the queue: drift from the migrations, stuck batches, counts,
stale leases, old pending jobs, keyless duplicates."""

from __future__ import annotations

from ingestion_pipeline.db import drift
from ingestion_pipeline.db.models import QueueHealth
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.health.check import IndexCheck


def schema_check(url: str) -> IndexCheck:
    try:
        problems = drift.ledger_problems(url) + drift.differences(drift.load_manifest(), drift.catalog_manifest(url))
    except IngestError as exc:
        return IndexCheck("schema_matches_migrations", False, f"could not check drift: {exc}")
    if not problems:
        return IndexCheck("schema_matches_migrations", True, "no drift: the database matches the migrations")
    return IndexCheck(
        "schema_matches_migrations",
        False,
        f"{len(problems)} difference(s) from the migrations, first: {problems[0]}",
        {"differences": len(problems), "all": "\n".join(problems)},
    )


def queue_checks(health: QueueHealth, max_pending_age_seconds: int) -> list[IndexCheck]:
    stuck, drifted = health.stuck_batches, health.batch_counter_drift
    mismatched, ungenerated = health.count_mismatches, health.indexed_without_generation
    age = health.oldest_pending_age_seconds
    return [
        IndexCheck(
            "no_stuck_batches",
            stuck == 0,
            f"{stuck} batch(es) say pending/processing although all their jobs are done (the janitor "
            "recounts them: `ingest janitor`)"
            if stuck
            else "no stuck batches",
            {"stuck_batches": stuck},
        ),
        IndexCheck(
            "counts_match_rows",
            not (drifted or mismatched or ungenerated),
            _counts_message(drifted, mismatched, ungenerated),
            {"batch_counter_drift": drifted, "count_mismatches": mismatched, "indexed_without_generation": ungenerated},
        ),
        IndexCheck(
            "no_stale_leases",
            health.stale_leases == 0,
            f"{health.stale_leases} job(s) hold a lease past its deadline (dead workers? a running "
            "worker reclaims jobs with attempts left; the janitor, `ingest janitor`, fails final attempts)"
            if health.stale_leases
            else "no stale leases",
            {"stale_leases": health.stale_leases},
        ),
        IndexCheck(
            "pending_jobs_fresh",
            age is None or age < max_pending_age_seconds,
            "no pending job"
            if age is None
            else f"the oldest pending job has waited {age} s (limit {max_pending_age_seconds} s)"
            + ("" if age < max_pending_age_seconds else ": are workers or the drain sensor running?"),
            {"oldest_pending_age_seconds": -1 if age is None else age},
        ),
        _duplicates_check(health),
    ]


def _duplicates_check(health: QueueHealth) -> IndexCheck:
    copies = health.keyless_duplicates
    if not copies:
        return IndexCheck(
            "no_duplicate_documents", True, "no keyless copy of a keyed document", {"keyless_duplicates": 0}
        )
    ids = ", ".join(str(i) for i in health.keyless_duplicate_ids)
    return IndexCheck(
        "no_duplicate_documents",
        False,
        f"{copies} keyless document(s) hold the bytes of a keyed document (a previous release's enqueue during the "
        f"upgrade; search finds them twice): `ingest delete` each copy (first ids: {ids})",
        {"keyless_duplicates": copies, "ids": ids},
    )


def _counts_message(drifted: int, mismatched: int, ungenerated: int) -> str:
    parts = [
        f"{drifted} batch(es) whose counters disagree with their jobs (the janitor recounts them)" if drifted else "",
        f"{mismatched} document(s) whose stored counts differ from their committed rows" if mismatched else "",
        f"{ungenerated} document(s) marked indexed with no committed generation" if ungenerated else "",
    ]
    return "; ".join(p for p in parts if p) or "stored counts equal the committed rows"
