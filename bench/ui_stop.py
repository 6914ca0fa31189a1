"""`ingest ui` start/stop cycles (issue 48: "stops in ≤ 10 s every time without SIGKILL,
removes its temporary Dagster home, and marks an interrupted run cancelled, not failed").

For each signal (SIGINT, SIGTERM), --cycles starts of `ingest ui` on one scratch data folder
(its embedded server started by the first and stopped at the end), each stopped by the
signal to its pid once the code location has loaded and the import sensor has ticked (the
daemon is up). With --with-run, as many more cycles per signal with a run in flight at the
stop: a refresh_batch_status run blocked on a batch row that this script keeps locked
through the stop (ingest_testing/ui_stop.py), so only its interruption ends it.

`ingest ui` runs as bench/dagster_ui.py starts it, with nothing set but INGEST_DATA_DIR.
Per cycle: seconds from the signal to `ingest ui`'s exit ("group s": to the moment no process of
its `dg dev` group was left, as `ingest ui` prints it), its exit status (0: `dg dev`
stopped by itself; 143/137: the stop was escalated to SIGTERM/SIGKILL), the escalations it
printed (a process other than `dg dev` may be the one escalated, with exit 0), its processes left,
`.tmp_dagster_home_*` folders in the checkout afterwards, temporary homes `dg dev` said it
made, the run's status afterwards, and the load average when the signal was sent (the
machine may be shared). Then per signal and case: min / median / max, and the counts; and
the runs in Dagster's storage by status at the end (FAILURE must be 0).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil
from common import ROOT, command_line, print_table
from dagster_ui import DagsterUI

from ingest_testing.ui_stop import (
    BlockedRun,
    checkout_leftovers,
    escalations,
    group_seconds,
    run_statuses,
    temporary_homes,
)
from ingestion_pipeline.db import embedded

BOUND_SECONDS = 10.0


def clean_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INGEST_", "DAGSTER_")) and k != "DATABASE_URL"}
    return {**env, "INGEST_DATA_DIR": str(data)}


def left_alive(processes: list[psutil.Process], timeout: float = 10) -> int:
    """How many of these are still alive (zombies count as gone) after up to `timeout`."""

    def alive(process: psutil.Process) -> bool:
        try:
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + timeout
    while any(alive(p) for p in processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    return sum(alive(p) for p in processes)


def cycle(data: Path, logs: Path, signum: signal.Signals, with_run: bool, number: int) -> dict:
    log = logs / f"{signum.name}-{'run' if with_run else 'idle'}-{number}.log"
    ui = DagsterUI(clean_env(data), log)
    run = None
    try:
        ui.wait_ready()
        if with_run:
            run = BlockedRun(ui.graphql, embedded.start(data))
            run.wait_in_flight()
        family = psutil.Process(ui.proc.pid).children(recursive=True)
        load = os.getloadavg()[0]
        started = time.monotonic()
        ui.proc.send_signal(signum)
        code = ui.proc.wait(timeout=60)  # a hang: six times the bound
        seconds = time.monotonic() - started
        status = run.status() if run else "-"
    finally:
        if run:
            run.release()
        ui.stop()  # nothing left to stop, unless this cycle failed
    output = log.read_text(errors="replace")
    return {
        "signal": signum.name,
        "case": "run in flight" if with_run else "idle",
        "seconds": seconds,
        "group": group_seconds(output),
        "code": code,
        "escalated": " ".join(escalations(output)) or "-",
        "left": left_alive(family),
        "leftovers": len(checkout_leftovers(ROOT)) + len(temporary_homes(output)),
        "run": status,
        "load": load,
    }


def summary(results: list[dict]) -> list[list[object]]:
    rows: list[list[object]] = []
    for key in dict.fromkeys((r["signal"], r["case"]) for r in results):
        group = [r for r in results if (r["signal"], r["case"]) == key]
        seconds = [r["seconds"] for r in group]
        rows.append(
            [
                *key,
                len(group),
                f"{min(seconds):.1f}",
                f"{statistics.median(seconds):.1f}",
                f"{max(seconds):.1f}",
                sum(s <= BOUND_SECONDS for s in seconds),
                sum(r["code"] == 0 for r in group),
                sum(r["escalated"] == "-" for r in group),
                sum(r["left"] + r["leftovers"] for r in group),
                " ".join(f"{status} {n}" for status, n in Counter(r["run"] for r in group).items()),
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=10, help="starts per signal and case (default 10)")
    parser.add_argument("--with-run", action="store_true", help="also cycles with a run in flight at the stop")
    args = parser.parse_args()
    if checkout_leftovers(ROOT):
        raise SystemExit(f"remove the checkout's {', '.join(checkout_leftovers(ROOT))} first: they would be counted")

    print(command_line())
    print(f"machine: nproc={os.cpu_count()}, load average at the start {os.getloadavg()[0]:.1f}")
    results = []
    logs = Path(tempfile.mkdtemp(prefix="bench-ui-stop-logs-"))  # kept: `ingest ui`'s output of each cycle
    with tempfile.TemporaryDirectory(prefix="bench-ui-stop-") as tmp:
        data = Path(tmp) / "data"
        try:
            for with_run in (False, True) if args.with_run else (False,):
                for signum in (signal.SIGINT, signal.SIGTERM):
                    for number in range(args.cycles):
                        r = cycle(data, logs, signum, with_run, number)
                        results.append(r)
                        print(
                            f"{r['signal']} {r['case']} #{number + 1}: {r['seconds']:.1f} s, exit {r['code']}, "
                            f"run {r['run']}, load {r['load']:.1f}",
                            flush=True,
                        )
            statuses = Counter(run_statuses(embedded.start(data)).values())
        finally:
            embedded.stop(data)

    print_table(
        "each stop",
        ["signal", "case", "stop s", "group s", "exit", "escalated", "left", "tmp homes", "run after", "load"],
        [
            [
                r["signal"],
                r["case"],
                f"{r['seconds']:.1f}",
                "-" if r["group"] is None else f"{r['group']:.1f}",
                r["code"],
                r["escalated"],
                r["left"],
                r["leftovers"],
                r["run"],
                f"{r['load']:.1f}",
            ]
            for r in results
        ],
    )
    print_table(
        f"per signal and case (stop: seconds from the signal to the exit; bound {BOUND_SECONDS:.0f} s)",
        ["signal", "case", "cycles", "min", "median", "max", "≤ 10 s", "exit 0", "no escalation", "left", "run after"],
        summary(results),
    )
    print_table("runs in Dagster's storage at the end", ["status", "runs"], sorted(statuses.items()))
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M')}; logs in {logs}")


if __name__ == "__main__":
    main()
