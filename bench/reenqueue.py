"""Re-enqueueing an unchanged folder: what it costs now that files are keyed, against the
previous release (content-addressed documents), whose real code is taken with `git archive`.

For each release, a fresh database migrated to that release's schema on the embedded
server; a folder of --docs tiny unique files (bench/large_import.py's generator);
`ingest enqueue` of the folder, `ingest work --drain`, then `ingest enqueue` of the same
folder again --rounds times, each timed whole (process start-up included). The previous
release answers `duplicate` for every file, this one `unchanged`; neither queues a job.
Printed: the median re-enqueue per release, per 1,000 files, and the ratio (the bar: at most
1.5x).

  .venv/bin/python bench/reenqueue.py [--docs 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from common import ROOT, command_line, create_database, embedded_server, machine_line, print_table
from large_import import generate_folder

PREVIOUS_RELEASE = "a4cc235"  # the end of the previous round: migrations through …_cancelled_batches_take_no_files
PREVIOUS_SCHEMA = "20261201000600"
CLI = "import sys; from ingestion_pipeline.cli import main; raise SystemExit(main(sys.argv[1:]))"


def archive(commit: str, dest: Path) -> Path:
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "ingestion_pipeline", "migrations"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as files:
        files.extractall(dest, filter="data")
    return dest


def ingest(code: Path | None, uri: str, *args: str) -> tuple[float, str]:
    env = {**os.environ, "DATABASE_URL": uri}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    began = time.perf_counter()
    # `python -c` puts the working directory first on sys.path: run the previous release
    # from its own folder, or this checkout's package would be imported instead.
    done = subprocess.run([sys.executable, "-c", CLI, *args], env=env, capture_output=True, text=True, cwd=code or ROOT)
    seconds = time.perf_counter() - began
    if done.returncode:
        raise RuntimeError(f"ingest {' '.join(args)} exited with {done.returncode}: {done.stderr.strip()[-500:]}")
    return seconds, done.stdout


def measure(server: str, label: str, code: Path | None, target: str | None, folder: Path, rounds: int) -> dict:
    uri = create_database(server, f"bench_reenqueue_{label}", migrate=True, target=target)
    first, _ = ingest(code, uri, "enqueue", str(folder), "--json")
    drain, _ = ingest(code, uri, "work", "--drain", "--json")
    again = []
    for _ in range(rounds):
        seconds, out = ingest(code, uri, "enqueue", str(folder), "--json")
        counts = json.loads(out)["counts"]
        if set(counts) - {"duplicate", "unchanged"}:
            raise RuntimeError(f"{label}: the re-enqueue queued something: {counts}")
        again.append(seconds)
    print(f"{label}: first enqueue {first:.1f} s, drain {drain:.1f} s, re-enqueues {[round(s, 1) for s in again]}")
    return {"first": first, "again": statistics.median(again), "counts": counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000, help="files in the folder (default 10000)")
    parser.add_argument("--rounds", type=int, default=3, help="re-enqueues per release (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reenqueue-") as scratch, embedded_server() as server:
        print(f"$ {command_line()}")
        print(machine_line(server))
        folder = Path(scratch) / "folder"
        folder.mkdir()
        generate_folder(folder, args.docs)
        previous = archive(PREVIOUS_RELEASE, Path(scratch) / "previous")
        results = {
            "previous release": measure(server, "previous", previous, PREVIOUS_SCHEMA, folder, args.rounds),
            "this release": measure(server, "head", None, None, folder, args.rounds),
        }
    base = results["previous release"]["again"]
    print_table(
        f"re-enqueue of an unchanged folder of {args.docs} files (median of {args.rounds})",
        ["release", "outcome", "seconds", "ms per 1,000 files", "vs previous"],
        [
            [
                label,
                ", ".join(f"{k} {v}" for k, v in r["counts"].items()),
                f"{r['again']:.2f}",
                f"{r['again'] / args.docs * 1e6:.0f}",
                f"{r['again'] / base:.2f}x",
            ]
            for label, r in results.items()
        ],
    )


if __name__ == "__main__":
    main()
