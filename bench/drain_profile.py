"""Where a drain's CPU and statements go: two `ingest work --drain` parsing in their threads,
and one parsing in its children, each over the same generated corpus in a fresh database.

Printed per configuration: documents per second, and CPU-seconds per 1,000 documents by
kind of process (the server's backends, `ingest work`, its parsing children), sampled
every 0.2 s. Then, from the last run's database: the top statements by server time
(`pg_stat_statements`, when the server preloads it: `shared_preload_libraries`) and the
time in each plpgsql function (`track_functions = 'pl'`, set on the scratch database).

    .venv/bin/python bench/drain_profile.py                      # embedded server, no statements
    .venv/bin/python bench/drain_profile.py --server-url postgresql://postgres@127.0.0.1:5432/postgres

The machine's speed moves between runs (bench/README.md, "Parsing in children"): compare
configurations within one invocation, with --rounds > 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

import psutil
from common import ROOT, command_line, connect, create_database, drop_database, embedded_server, print_table
from ingest_corpus import PARSING
from ingest_runs import generate_corpus, run_cli

DATABASE = "bench_drain_profile"
INGEST = str(ROOT / ".venv" / "bin" / "ingest")
# ingest_corpus.py's two configurations that use the whole machine: (label, processes,
# INGEST_PARSE_PROCESSES, INGEST_WORKER_CONCURRENCY). The last one's statements are printed.
CONFIGURATIONS = PARSING[1:]


def kind_of(process: psutil.Process) -> str | None:
    name, command = process.name(), " ".join(process.cmdline())
    if "postgres" in name:
        return "server"
    if "ingest work" in command:
        return "worker"
    if "multiprocessing" in command or "forkserver" in command:
        return "children"
    return None


class CpuSampler:
    """CPU-seconds by kind of process while a drain runs (the last sample of each pid)."""

    def __init__(self):
        self.start = self._sample()
        self.last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> dict[int, tuple[str, float]]:
        seen = {}
        for process in psutil.process_iter():
            try:
                kind = kind_of(process)
                if kind:
                    times = process.cpu_times()
                    seen[process.pid] = (kind, times.user + times.system)
            except psutil.Error:
                continue
        return seen

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.last.update(self._sample())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def by_kind(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for pid, (kind, seconds) in self.last.items():
            totals[kind] = totals.get(kind, 0.0) + seconds - self.start.get(pid, (kind, 0.0))[1]
        return totals


def drain(uri: str, folder: Path, configuration: tuple) -> tuple[int, float, dict[str, float]]:
    env = {**os.environ, "DATABASE_URL": uri}
    subprocess.run(
        [INGEST, "enqueue", str(folder), "--batch", "drain profile"], env=env, check=True, capture_output=True
    )
    with connect(uri) as conn:
        conn.execute("checkpoint")
        conn.execute(f"alter database \"{DATABASE}\" set track_functions = 'pl'")
        if statements_available(conn):
            conn.execute("create extension if not exists pg_stat_statements")
            conn.execute("select pg_stat_statements_reset()")
        conn.execute("select pg_stat_reset()")
    _, processes, parse_processes, concurrency = configuration
    began = time.monotonic()
    with CpuSampler() as sampler:
        completed = run_cli(uri, concurrency, processes, parse_processes)["completed"]
    return completed, time.monotonic() - began, sampler.by_kind()


def statements_available(conn) -> bool:
    return "pg_stat_statements" in conn.execute("show shared_preload_libraries").fetchone()["shared_preload_libraries"]


def print_server_time(uri: str) -> None:
    with connect(uri) as conn:
        if statements_available(conn):
            rows = conn.execute("""
                select calls, round(total_exec_time::numeric) as ms, round((total_exec_time / calls)::numeric, 3)
                       as per_call, left(regexp_replace(query, '\\s+', ' ', 'g'), 80) as statement
                  from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
                 order by total_exec_time desc limit 12""").fetchall()
            print_table(
                "statements of the last run, by server time",
                ["calls", "ms", "ms/call", "statement"],
                [list(row.values()) for row in rows],
            )
        else:
            print("\n(pg_stat_statements is not preloaded on this server: no statement table)")
        rows = conn.execute("""
            select funcname, calls, round(total_time::numeric) as total_ms, round(self_time::numeric) as self_ms
              from pg_stat_user_functions order by total_time desc limit 12""").fetchall()
        commits = conn.execute(
            "select xact_commit from pg_stat_database where datname = current_database()"
        ).fetchone()["xact_commit"]
    print_table(
        "plpgsql functions of the last run (wall time inside them)",
        ["function", "calls", "total ms", "self ms"],
        [list(row.values()) for row in rows],
    )
    print(f"\ntransactions committed in the last run's database: {commits}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000, help="generated documents (default 1000)")
    parser.add_argument("--mean-kb", type=float, default=32, help="mean document size in KiB (default 32)")
    parser.add_argument("--server-url", help="a PostgreSQL server to use (default: a private embedded one)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per configuration, interleaved (default 1)")
    args = parser.parse_args()

    print(f"$ {command_line()}")
    with tempfile.TemporaryDirectory(prefix="drain-profile-") as corpus:
        folder = Path(corpus)
        generate_corpus(folder, args.docs, args.mean_kb, seed=7)
        server = nullcontext(args.server_url) if args.server_url else embedded_server()
        with server as server_uri:
            rows, uri = [], None
            for number in range(1, args.rounds + 1):
                for configuration in CONFIGURATIONS:
                    label = configuration[0]
                    uri = create_database(server_uri, DATABASE, migrate=True)
                    completed, seconds, cpu = drain(uri, folder, configuration)
                    per_1000 = {kind: 1000 * value / completed for kind, value in cpu.items()}
                    rows.append(
                        [
                            number,
                            label,
                            completed,
                            f"{seconds:.2f}",
                            f"{completed / seconds:.1f}",
                            *(f"{per_1000.get(kind, 0.0):.1f}" for kind in ("server", "worker", "children")),
                            f"{sum(per_1000.values()):.1f}",
                        ]
                    )
                    print(f"round {number}, {label}: {completed} docs in {seconds:.2f}s", flush=True)
                    if not (number == args.rounds and configuration is CONFIGURATIONS[-1]):
                        drop_database(server_uri, DATABASE)
            print_table(
                f"{args.docs} documents of {args.mean_kb:g} KiB; CPU-seconds per 1,000 documents",
                ["round", "configuration", "docs", "drain s", "docs/s", "server", "worker", "children", "total"],
                rows,
            )
            print_server_time(uri)
            drop_database(server_uri, DATABASE)


if __name__ == "__main__":
    main()
