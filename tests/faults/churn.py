"""A folder that keeps changing while it is synced (tests/faults/test_sync_churn.py): a writer
process adds, rewrites and deletes files at random, in place (no atomic rename: a sync may
read a file half-written), until a stop file appears. With a LOG file, each action is
appended to it as one line (`unlink PATH`, `write PATH`) before it begins, so a reader can
tell which files were touched while it ran (tests/faults/sync_loop.py).

Run as `python -m tests.faults.churn FOLDER STOP_FILE SEED [LOG]`.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

FILES = 40  # names the writer picks from: f00.txt … f39.txt, some in a subfolder
# Cold files (cold/c00.txt …): seeded, and rewritten by one action in COLD_EVERY only, so most
# stay as they are between two syncs (a cancelled build of one must come back `requeued`).
COLD = 20
COLD_EVERY = 25
WORDS = "heron egret ibis crane stork plover curlew godwit avocet dunlin knot sanderling".split()


def path_of(folder: Path, n: int) -> Path:
    return folder / ("deep" if n % 4 == 0 else "") / f"f{n:02d}.txt"


def cold_path(folder: Path, n: int) -> Path:
    return folder / "cold" / f"c{n:02d}.txt"


def text(rng: random.Random, n: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))  # sizes vary: a change shows
    return f"# Note {n}\n\nThe {words} at {time.time_ns()}.\n"


def seed(folder: Path, rng: random.Random) -> None:
    for sub in ("deep", "cold"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for n in range(0, FILES, 2):
        path_of(folder, n).write_text(text(rng, n))
    for n in range(COLD):
        cold_path(folder, n).write_text(text(rng, n))


def churn(folder: Path, stop: Path, rng: random.Random, log: Path | None = None) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND) if log is not None else None
    while not stop.exists():
        cold = rng.randrange(COLD_EVERY) == 0
        path = cold_path(folder, rng.randrange(COLD)) if cold else path_of(folder, rng.randrange(FILES))
        remove = rng.random() < 0.25 and path.exists() and not cold
        if fd is not None:  # one write per line: a reader never sees half of one
            os.write(fd, f"{'unlink' if remove else 'write'} {path}\n".encode())
        if remove:
            path.unlink()
        else:  # written in two parts, so a read may come between them
            with path.open("w") as out:
                body = text(rng, int(path.stem[1:]))  # f07 / c07: 7
                out.write(body[: len(body) // 2])
                out.flush()
                time.sleep(rng.uniform(0, 0.005))
                out.write(body[len(body) // 2 :])
        time.sleep(rng.uniform(0.005, 0.03))


if __name__ == "__main__":
    log = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    churn(Path(sys.argv[1]), Path(sys.argv[2]), random.Random(int(sys.argv[3])), log)
