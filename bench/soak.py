"""Soak: the fault harness for as long as you like (tests/faults runs a bounded minute).

    .venv/bin/python bench/soak.py --minutes 10

Worker processes drain waves of tiny documents while a chaos loop SIGKILLs them,
terminates their backends, pauses them past the stale window (zombies) and stalls one job
thread of a live worker past its lease while its claim loop keeps claiming (the thread
then writes and commits with its old token); a janitor runs alongside (its calls logged).
At the end everything drains and the checker reads the client-side histories and the
database. Prints the totals, among them the writes accepted from superseded lease tokens
(must be 0), the zombies refused by a fence, the janitor's passes and errors and the
deletion audit; exits 1 on any violation or janitor error."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ingestion_pipeline.db import embedded  # noqa: E402
from ingestion_pipeline.db import migrate as migrator  # noqa: E402
from tests.faults.checker import check  # noqa: E402
from tests.faults.harness import run_faults  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10, help="chaos duration (default 10)")
    parser.add_argument("--documents", type=int, default=1000, help="documents per wave (default 1000)")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    parser.add_argument("--seed", type=int, default=7, help="chaos random seed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ingest-soak-") as scratch:
        folder = Path(scratch)
        url = embedded.start(folder / "pg")
        try:
            migrator.migrate(url)
            started = time.monotonic()
            stats = run_faults(url, folder, documents=args.documents, workers=args.workers,
                               chaos_seconds=args.minutes * 60, drain_timeout=600, seed=args.seed, refill=True)
            report = check(url, stats.histories)
        finally:
            embedded.stop(folder / "pg")
    jobs = report.stats.get("jobs", {})
    documents = report.stats.get("documents", {})
    audit = report.stats.get("audit") or {}
    rows = [("jobs", sum(jobs.values())), ("completed", jobs.get("completed", 0)), ("failed", jobs.get("failed", 0)),
            ("documents indexed / failed", f"{documents.get('indexed', 0)} / {documents.get('failed', 0)}"),
            ("kills", stats.kills), ("backend terminations", stats.backend_terminations),
            ("pauses (zombies)", stats.pauses), ("stalls armed (SIGUSR1)", stats.stall_signals),
            ("stalls (job thread past its lease)", stats.stalls),
            ("zombie refusals (lease_lost, IF001, 23503)", report.stats.get("zombie_refusals", 0)),
            ("janitor passes", stats.janitor_passes), ("janitor errors", len(stats.janitor_errors)),
            ("janitor calls logged / failed", f"{report.stats.get('janitor_calls', 0)} / "
                                              f"{report.stats.get('janitor_call_errors', 0)}"),
            ("jobs expired by the janitor", report.stats.get("expired_by_janitor", 0)),
            ("rpc calls logged", report.stats.get("calls", 0)), ("redeliveries", report.redeliveries),
            ("artifact writes refused (by SQLSTATE)", ", ".join(
                f"{code}: {n}" for code, n in sorted(report.stats.get("artifact_writes_refused", {}).items()))
             or "0"),
            ("writes from superseded tokens", report.stats.get("superseded_token_writes", 0)),
            ("generations / artifact rows deleted (audit)", f"{audit.get('generations_deleted', 0)} / "
                                                            f"{audit.get('artifact_rows_deleted', 0)}"),
            ("deleted while a job of the document was open", audit.get("under_open_job", 0)),
            ("violations", f"{len(report.violations)}"
             + (f" ({', '.join(f'{rule}: {n}' for rule, n in sorted(report.by_rule.items()))})"
                if report.by_rule else "")),
            ("seconds", round(time.monotonic() - started, 1))]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    for violation in report.violations[:50]:
        print(f"VIOLATION: {violation}")
    for error in stats.janitor_errors[:20]:
        print(f"JANITOR ERROR: {error}")
    return 1 if report.violations or stats.janitor_errors else 0

if __name__ == "__main__":
    sys.exit(main())
