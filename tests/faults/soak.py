"""Soak: the fault harness for as long as you like (tests/faults runs a bounded minute). A
fault test, not a speed measurement, so it lives beside the harness; run it as a module from
the repository root:

    .venv/bin/python -m tests.faults.soak --minutes 10
    .venv/bin/python -m tests.faults.soak --minutes 2 --migrate-to 20261201000600   # the schema before a migration

Worker processes drain waves of tiny documents while a chaos loop SIGKILLs them,
terminates their backends, pauses them past the stale window (zombies) and stalls one job
thread of a live worker past its lease while its claim loop keeps claiming (the thread
then writes and commits with its old token), SIGKILLs workers that hold a job on its
final attempt (every 8th document has max_attempts=1: the job must be dead-lettered) and
restarts the embedded server under the fleet (every pooled connection left dead and idle),
and plays the operator: deletes random documents (indexed, queued, or being built right
now), cancels random import batches and retries failed jobs in bulk (a batch's while its
other jobs are being acknowledged, several batches' by id, every failed one; every 15th
document fails on every attempt, so there are always some) and enqueues new versions of
documents under their keys (part of the time of one being built, up to three in quick
succession), its calls logged; a writer process churns a folder (files added, rewritten
in place, deleted) that `ingest sync` passes mirror into the collection `churn`, one pass
in five SIGKILLed (tests/faults/sync_loop.py; --no-sync leaves it out), while in-process
passes race them (tests/faults/sync_race.py): at each pass's first delete, some files it
found vanished come back with new bytes and are enqueued as `ingest enqueue` does (their
deletes must be refused), and now and then a listed file is enqueued again; a janitor
runs alongside (its calls logged). At the end the writer stops, a final sync runs,
everything drains, a last janitor pass cleans up until nothing is left, and the checker
reads the client-side histories and the database, and holds the synced collection against
the folder (check_source) and the raced passes' log (check_sync_races). Prints the
totals, among them the deletes (in flight, purged at once), the cancels and the jobs they
cancelled (by the answers and in the database), the retries and
the jobs they put back, the new versions (those that superseded a build in flight) and
the builds committed by version, the refusals of workers whose job was cancelled, the deadlocks
(40P01) and serialization failures of anyone's calls (workers', janitor's, operator's:
each a violation), the writes accepted from superseded lease tokens (must be 0), the
zombies refused by a fence,
the janitor's passes and errors, the deletion audit, the final-attempt kills and how their
jobs ended, the server restarts, the bulk acknowledgements, the batches whose counters the
janitor had to recount (must be 0) and the jobs still open at the end; exits 1 on any
violation, janitor error, operator call that raised, job left open, final-attempt job not
dead-lettered, deadlock or worker that exited on its own."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from ingestion_pipeline.db import embedded
from ingestion_pipeline.db import migrate as migrator
from tests.faults.checker import check, check_source
from tests.faults.harness import ServerControl, final_attempt_outcomes, open_jobs, run_faults
from tests.faults.sync_loop import COLLECTION as SYNC_COLLECTION
from tests.faults.sync_loop import SyncStats
from tests.faults.sync_race import RaceStats, check_sync_races


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10, help="chaos duration (default 10)")
    parser.add_argument("--documents", type=int, default=1000, help="documents per wave (default 1000)")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    parser.add_argument("--seed", type=int, default=7, help="chaos random seed")
    parser.add_argument(
        "--migrate-to",
        metavar="VERSION",
        default=None,
        help="migrate only up to this version (default: head), e.g. to soak the schema before a fix",
    )
    parser.add_argument(
        "--no-sync", dest="sync", action="store_false", help="no syncs of a churning folder (default: on)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ingest-soak-") as scratch:
        folder = Path(scratch)
        url = embedded.start(folder / "pg")
        try:
            migrator.migrate(url, target=args.migrate_to)
            started = time.monotonic()
            stats = run_faults(
                url,
                folder,
                documents=args.documents,
                workers=args.workers,
                chaos_seconds=args.minutes * 60,
                drain_timeout=600,
                seed=args.seed,
                refill=True,
                server=ServerControl(url, folder / "pg"),
                sync_folder=folder / "sync" if args.sync else None,
            )
            report = check(url, stats.histories)
            if args.sync:
                check_source(url, SYNC_COLLECTION, folder / "sync" / "share", report)
                if stats.sync_race_log is not None:
                    check_sync_races(stats.sync_race_log, report)
            still_open = open_jobs(url)
            final_outcomes = final_attempt_outcomes(url, stats.final_attempt_jobs, stats.final_attempt_seen)
        finally:
            embedded.stop(folder / "pg")
    jobs = report.stats.get("jobs", {})
    documents = report.stats.get("documents", {})
    audit = report.stats.get("audit") or {}
    lifecycle = report.stats.get("lifecycle") or {}
    deadlocks = report.stats.get("deadlocks", 0)
    versions_committed = report.stats.get("versions_committed") or {}
    rollbacks = ", ".join(f"{caller}: {n}" for caller, n in sorted(report.stats.get("rollbacks_by_caller", {}).items()))
    rows = [
        ("jobs", sum(jobs.values())),
        ("completed", jobs.get("completed", 0)),
        ("failed", jobs.get("failed", 0)),
        ("cancelled", jobs.get("cancelled", 0)),
        (
            "documents indexed / failed / cancelled / deleted",
            f"{documents.get('indexed', 0)} / "
            f"{documents.get('failed', 0)} / "
            f"{documents.get('cancelled', 0)} / "
            f"{lifecycle.get('deleted_documents', 0)}",
        ),
        ("kills", stats.kills),
        ("backend terminations", stats.backend_terminations),
        ("final-attempt kills (job held on its last attempt)", stats.final_attempt_kills),
        (
            "final-attempt jobs ended failed / dead_letter",
            f"{sum(final_outcomes.values())} / {final_outcomes.get(('failed', 'dead_letter'), 0)}",
        ),
        ("server restarts (pools left with dead connections)", stats.server_restarts),
        ("all backends terminated", stats.all_backends_terminated),
        ("workers that exited on their own", len(stats.worker_exits)),
        ("pauses (zombies)", stats.pauses),
        ("stalls armed (SIGUSR1)", stats.stall_signals),
        ("stalls (job thread past its lease)", stats.stalls),
        ("zombie refusals (lease_lost, IF001, 23503)", report.stats.get("zombie_refusals", 0)),
        (
            "deletes ok: in flight / purged at once",
            f"{stats.deletes}: {stats.deletes_in_flight} / {stats.deletes_purged}",
        ),
        ("deletes refused (already deleted)", stats.events.get("delete_refused_already_deleted", 0)),
        ("batch cancels ok (jobs in flight)", f"{stats.cancels} ({stats.cancels_in_flight})"),
        ("batch cancels refused (nothing open)", stats.events.get("cancel_refused_nothing_open", 0)),
        (
            "retries ok (batch in flight / by ids / all)",
            "{} ({} / {} / {})".format(
                stats.retries, *(stats.retries_by_mode.get(mode, 0) for mode in ("batch_in_flight", "jobs", "all"))
            ),
        ),
        (
            "jobs retried: by the answers / refused (by reason)",
            f"{stats.jobs_retried} / "
            + (", ".join(f"{reason}: {n}" for reason, n in sorted(stats.retry_refused.items())) or "0"),
        ),
        (
            "new versions ok: superseding an open job / a build in flight",
            f"{stats.versions}: {stats.versions_superseding} / {stats.versions_in_flight}",
        ),
        (
            "builds committed by version (1 / 2 / 3 / more)",
            " / ".join(
                str(n)
                for n in (
                    *(versions_committed.get(v, 0) for v in (1, 2, 3)),
                    sum(n for v, n in versions_committed.items() if v > 3),
                )
            ),
        ),
        (
            "documents indexed at an older version (latest failed or cancelled)",
            report.stats.get("indexed_at_an_older_version", 0),
        ),
        ("jobs cancelled: by the answers / in the database", f"{stats.jobs_cancelled} / {jobs.get('cancelled', 0)}"),
        (
            "cancelled jobs' calls refused: begun after / during the cancel",
            f"{report.stats.get('cancel_refusals', 0)} / {report.stats.get('cancel_refusals_during', 0)}",
        ),
        ("operator calls that raised (deadlocks)", f"{len(stats.operator_errors)} ({stats.operator_deadlocks})"),
        ("janitor passes", stats.janitor_passes),
        ("janitor errors", len(stats.janitor_errors)),
        ("final cleanup calls (after the drain)", stats.final_cleanup_calls),
        (
            "janitor calls logged / failed",
            f"{report.stats.get('janitor_calls', 0)} / {report.stats.get('janitor_call_errors', 0)}",
        ),
        ("jobs expired by the janitor", report.stats.get("expired_by_janitor", 0)),
        ("rpc calls logged", report.stats.get("calls", 0)),
        ("redeliveries", report.redeliveries),
        (
            "acks: bulk statements / items / largest",
            "{statements} / {items} / {largest}".format(
                **(report.stats.get("bulk_acks") or {"statements": 0, "items": 0, "largest": 0})
            ),
        ),
        ("batches whose counters the janitor recounted (drift)", report.stats.get("batch_repairs", 0)),
        (
            "artifact writes refused (by SQLSTATE)",
            ", ".join(f"{code}: {n}" for code, n in sorted(report.stats.get("artifact_writes_refused", {}).items()))
            or "0",
        ),
        ("writes from superseded tokens", report.stats.get("superseded_token_writes", 0)),
        (
            "generations / artifact rows deleted (audit)",
            f"{audit.get('generations_deleted', 0)} / {audit.get('artifact_rows_deleted', 0)}",
        ),
        ("deleted while a job of the document was open", audit.get("under_open_job", 0)),
        *_sync_rows(stats.sync),
        *_race_rows(stats.sync_race, report.stats.get("sync_races") or {}),
        ("jobs open at the end", still_open),
        ("deadlocks", f"{deadlocks}" + (f" ({rollbacks})" if deadlocks else "")),
        ("serialization failures", report.stats.get("serialization_failures", 0)),
        (
            "violations",
            f"{len(report.violations)}"
            + (
                f" ({', '.join(f'{rule}: {n}' for rule, n in sorted(report.by_rule.items()))})"
                if report.by_rule
                else ""
            ),
        ),
        ("seconds", round(time.monotonic() - started, 1)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    for violation in report.violations[:50]:
        print(f"VIOLATION: {violation}")
    for error in stats.janitor_errors[:20]:
        print(f"JANITOR ERROR: {error}")
    for error in stats.operator_errors[:20]:
        print(f"OPERATOR ERROR: {error}")
    dead_lettered = final_outcomes.get(("failed", "dead_letter"), 0)
    if dead_lettered != len(stats.final_attempt_jobs):
        print(f"FINAL-ATTEMPT JOBS NOT DEAD-LETTERED: {final_outcomes}")
    for label in stats.worker_exits:
        print(f"WORKER EXITED: {label} (see its .err)")
    sync_failed = stats.sync is not None and (stats.sync.unexpected or not stats.sync.passes["final ok"])
    sync_failed = sync_failed or bool(stats.sync_race and stats.sync_race.unexpected)
    for error in [
        *(stats.sync.unexpected if stats.sync else ()),
        *(stats.sync_race.unexpected if stats.sync_race else ()),
    ][:20]:
        print(f"SYNC ERROR: {error}")
    failed = (
        report.violations
        or deadlocks
        or stats.janitor_errors
        or stats.operator_errors
        or still_open
        or stats.worker_exits
        or dead_lettered != len(stats.final_attempt_jobs)
        or sync_failed
    )
    return 1 if failed else 0


def _sync_rows(sync: SyncStats | None) -> list[tuple[str, object]]:
    if sync is None:
        return []
    outcomes = ("ok", "killed", "database_unavailable", "batch_cancelled", "churned_mid_read", "unexpected")
    changes = ("new", "changed", "unchanged", "requeued", "deleted", "failed")
    return [
        (
            "sync passes: ok / killed / db unavailable / batch cancelled / files churned mid-read / unexpected",
            " / ".join(str(sync.passes[outcome]) for outcome in outcomes),
        ),
        ("sync files: " + " / ".join(changes), " / ".join(str(sync.counts[change]) for change in changes)),
        ("final sync (folder at rest)", ", ".join(k[6:] for k in sync.passes if k.startswith("final ")) or "none"),
    ]


def _race_rows(race: RaceStats | None, checked: dict[str, int]) -> list[tuple[str, object]]:
    """The in-process syncs racing new versions of their vanished files (tests/faults/sync_race.py)."""
    if race is None:
        return []
    outcomes = ("ok", "database_unavailable", "batch_cancelled", "unexpected")
    changes = ("new", "changed", "unchanged", "deleted")
    return [
        (
            "raced sync passes: ok / db unavailable / batch cancelled / unexpected",
            " / ".join(str(race.passes[outcome]) for outcome in outcomes),
        ),
        ("raced sync files: " + " / ".join(changes), " / ".join(str(race.counts[change]) for change in changes)),
        (
            "vanished files re-created + enqueued before the deletes / of them deleted (must be 0)",
            f"{race.raced} / {checked.get('raced_deleted', 0)}",
        ),
        (
            "ingest-enqueue calls racing the syncs (by outcome)",
            ", ".join(f"{outcome}: {n}" for outcome, n in sorted(race.enqueued.items())) or "0",
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
