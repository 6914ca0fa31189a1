"""`ingest sync` of a large local folder: the first sync (every file new) and a re-sync with
nothing changed, each in a process of its own on a fresh database on the embedded server.

The folder: --files tiny files (bench/large_import.py's generator) in subfolders of 1,000.
Each sync runs `sync_source` (what `ingest sync` runs) in a child process that counts, with
an audit hook on `open`, every file of the folder it opens: the filesystem layer's own
count of reads, whatever the sync reports. Printed per sync: files, seconds, files/s, files
opened, bytes the sync read, and the child's peak RSS. The bars (issue 32): the first sync
at >= 400 files/s, the re-sync opening no file in <= 10 s, peak RSS under 300 MB.

  .venv/bin/python bench/sync.py [--files 100000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import command_line, create_database, embedded_server, machine_line, print_table
from large_import import generate_folder

PER_FOLDER = 1_000


def child(uri: str, folder: str) -> None:
    """One sync, measured from inside (run by the parent as `bench/sync.py --child`)."""
    opened = 0

    def count_opens(event: str, args: tuple) -> None:
        nonlocal opened
        if event == "open" and isinstance(args[0], str) and args[0].startswith(folder):
            opened += 1

    sys.addaudithook(count_opens)
    from ingestion_pipeline.db.connection import make_pool
    from ingestion_pipeline.operations.sync import SyncOptions, sync_source
    from ingestion_pipeline.settings import load_settings

    settings = load_settings(database_url=uri)
    with make_pool(uri, settings) as pool:
        began = time.perf_counter()
        report = sync_source(pool, folder, SyncOptions(collection="bench", max_bytes=settings.max_file_bytes))
        seconds = time.perf_counter() - began
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    counts = {name: n for name, n in report.counts.items() if n}
    print(
        json.dumps(
            {"seconds": seconds, "counts": counts, "opened": opened, "bytes_read": report.bytes_read, "rss_mb": rss_mb}
        )
    )


def run_sync(uri: str, folder: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", uri, str(folder)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(f"the sync failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_folder(root: Path, files: int) -> None:
    for start in range(0, files, PER_FOLDER):
        sub = root / f"part-{start // PER_FOLDER:04d}"
        sub.mkdir(parents=True)
        generate_folder(sub, min(PER_FOLDER, files - start))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000, help="files in the folder (default 100000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp, embedded_server() as server:
        folder = Path(tmp) / "share"
        make_folder(folder, args.files)
        uri = create_database(server, "bench_sync", migrate=True)
        rows = []
        for label in ("first sync", "re-sync, nothing changed"):
            result = run_sync(uri, folder)
            files = sum(result["counts"].values())
            rows.append(
                (
                    label,
                    files,
                    ", ".join(f"{k} {v}" for k, v in sorted(result["counts"].items())),
                    f"{result['seconds']:.1f}",
                    f"{files / result['seconds']:.0f}",
                    result["opened"],
                    result["bytes_read"],
                    f"{result['rss_mb']:.0f}",
                )
            )
        print(machine_line(uri))
        print(command_line())
        print_table(
            f"ingest sync of a local folder of {args.files} tiny files",
            ["sync", "files", "outcome", "seconds", "files/s", "files opened", "bytes read", "peak RSS MB"],
            rows,
        )


if __name__ == "__main__":
    main()
