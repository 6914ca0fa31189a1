"""`make lint`: no file git tracks is over 1 MB (a wheel, a data dump or a tool binary
belongs in a package index or a release, not in the history every clone downloads).

    python tools/check_file_sizes.py [--limit BYTES]

Exits 1 naming each file over the limit; outside a git checkout there is nothing to check."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

LIMIT = 1024 * 1024


def tracked_files(root: Path) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=False)  # noqa: S607
    if listed.returncode != 0:
        return []
    return [root / name for name in listed.stdout.decode().split("\0") if name]


def oversized(root: Path, limit: int = LIMIT) -> list[tuple[Path, int]]:
    found = []
    for path in tracked_files(root):
        if path.is_file() and (size := path.stat().st_size) > limit:
            found.append((path.relative_to(root), size))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=LIMIT, help="bytes (default 1 MB)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    args = parser.parse_args(argv)
    found = oversized(args.root.resolve(), args.limit)
    for path, size in found:
        print(f"{path}: {size:,} bytes, over the {args.limit:,}-byte limit for tracked files", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
