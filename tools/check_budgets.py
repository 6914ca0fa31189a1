"""`make lint`: the size budgets of issue 45. The two READMEs stay a page a newcomer reads
(README.md ≤ 10 KB, bench/README.md ≤ 25 KB: detail belongs in docs/*.md and
bench/results/*.md, linked), and every module of the package and every bench script stays
≤ 400 lines (a longer one is split: bench scripts into a shared harness and short scripts).

    python tools/check_budgets.py [--root DIR]

Only files git tracks count. Exits 1 naming each file over its budget, and each exception
below that is no longer needed (so the table only ever shrinks); outside a git checkout
there is nothing to check."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

BYTE_BUDGETS = {"README.md": 10 * 1024, "bench/README.md": 25 * 1024}
LINE_BUDGET = 400

# The one place where a file may exceed its budget: path -> (its own budget, why). Keep it
# empty or nearly so; an entry whose file is back within the general budget is reported.
EXCEPTIONS: dict[str, tuple[int, str]] = {}


def tracked(root: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=False)  # noqa: S607
    if listed.returncode != 0:
        return []
    return [name for name in listed.stdout.decode().split("\0") if name]


def line_budgeted(name: str) -> bool:
    """Every module of the package (at any depth) and every script directly in bench/."""
    path = PurePosixPath(name)
    if path.suffix != ".py":
        return False
    return path.parts[0] == "ingestion_pipeline" or path.parent == PurePosixPath("bench")


def measure(root: Path, name: str) -> tuple[int, int, str] | None:
    """(size, budget, unit) for a budgeted file, None for any other."""
    path = root / name
    if not path.is_file():  # tracked but deleted in the work tree
        return None
    if name in BYTE_BUDGETS:
        return path.stat().st_size, BYTE_BUDGETS[name], "bytes"
    if line_budgeted(name):
        with path.open("rb") as f:
            return sum(1 for _ in f), LINE_BUDGET, "lines"
    return None


def over_budget(root: Path, exceptions: Mapping[str, tuple[int, str]] = EXCEPTIONS) -> list[str]:
    """One message per file over its budget and per exception no longer needed."""
    problems = []
    for name in tracked(root):
        if (measured := measure(root, name)) is None:
            continue
        size, budget, unit = measured
        if name in exceptions:
            allowed, _why = exceptions[name]
            if size <= budget:
                problems.append(
                    f"{name}: {size:,} {unit}, within the {budget:,}-{unit[:-1]} budget: drop its exception"
                )
            budget = allowed
        if size > budget:
            problems.append(f"{name}: {size:,} {unit}, over its budget of {budget:,} {unit}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    args = parser.parse_args(argv)
    problems = over_budget(args.root.resolve())
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("budgets and their exceptions: tools/check_budgets.py", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
