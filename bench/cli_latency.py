"""How fast `ingest` answers from the shell (issue 60: `ingest search` <= 0.3 s wall for a
one-word query on the embedded server, idle machine, median of 20).

Each command runs --runs times (default 20) as its own process, the commands taking turns
round by round so that all see the same load: `ingest --help`; `ingest search WORD` in the
default mode (hybrid with the default embedder: the query is embedded); `ingest search WORD
--mode lexical`; and `python -c "import ingestion_pipeline.cli"`, whose import is timed
inside the interpreter. Wall time is the parent's clock around each run; CPU is the child's
user + system time (getrusage), which load inflates less than wall.

Bytecode: a package installed by pip is byte-compiled at install and `uv pip install`
(make install) writes the cache on first import, but PYTHONDONTWRITEBYTECODE=1 (set in some
shells, CI and containers) makes every run compile every module again: 1 s of CPU before
any work. --bytecode cached (default) runs with a cache of its own (PYTHONPYCACHEPREFIX, a
temporary folder, filled by an untimed first run); none runs with no cache; both prints
both.

The database is the one `ingest` uses here (DATABASE_URL or the embedded server of
INGEST_DATA_DIR, by default the user's); WORD (default `fencing`) must find something there:
`make demo` indexes the samples, where it does. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import command_line, median, percentile, print_table

ROOT = Path(__file__).resolve().parents[1]
INGEST = str(Path(sys.executable).with_name("ingest"))
IMPORT_TIMER = "import time; t = time.perf_counter(); import ingestion_pipeline.cli; print(time.perf_counter() - t)"


def commands(word: str) -> dict[str, list[str]]:
    return {
        "ingest --help": [INGEST, "--help"],
        f"ingest search {word}": [INGEST, "search", word],
        f"ingest search {word} --mode lexical": [INGEST, "search", word, "--mode", "lexical"],
        "import ingestion_pipeline.cli": [sys.executable, "-P", "-c", IMPORT_TIMER],  # -P: the installed package
    }


def environment(bytecode: str, cache: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(cache))
    if bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # and the prefix is an empty folder: nothing read
    return env


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, the child's CPU seconds, its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} (nproc={os.cpu_count()})"


def measure(word: str, runs: int, bytecode: str) -> list[list[object]]:
    with tempfile.TemporaryDirectory(prefix="cli-latency-pycache-") as cache:
        env = environment(bytecode, Path(cache))
        todo = commands(word)
        hits = run_once([INGEST, "search", word, "--json"], env)[2]  # untimed: fills the cache
        if hits.strip() == "[]":
            sys.exit(f"`ingest search {word}` finds nothing here: index the samples first (make demo)")
        for argv in todo.values():
            run_once(argv, env)
        walls: dict[str, list[float]] = {name: [] for name in todo}
        cpus: dict[str, list[float]] = {name: [] for name in todo}
        imports: list[float] = []
        for _ in range(runs):
            for name, argv in todo.items():
                wall, cpu, out = run_once(argv, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
                if argv[-1] == IMPORT_TIMER:
                    imports.append(float(out.strip()))
    rows: list[list[object]] = []
    for name in todo:
        rows.append(
            [name, bytecode, *(f"{x * 1000:.0f}" for x in _stats(walls[name])), f"{median(cpus[name]) * 1000:.0f}"]
        )
    rows.append(["(the import alone, in-process)", bytecode, *(f"{x * 1000:.0f}" for x in _stats(imports)), ""])
    return rows


def _stats(values: list[float]) -> tuple[float, float]:
    return median(values), percentile(values, 95)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--word", default="fencing", help="the one-word query (default: fencing, in the samples)")
    parser.add_argument("--bytecode", choices=("cached", "none", "both"), default="cached")
    args = parser.parse_args()
    print(f"$ {command_line()}")
    where = (
        "DATABASE_URL"
        if os.environ.get("DATABASE_URL")
        else f"embedded server, INGEST_DATA_DIR={os.environ.get('INGEST_DATA_DIR', '(default)')}"
    )
    print(f"database: {where}")
    print(f"before: {load()}")
    rows = []
    for bytecode in ("cached", "none") if args.bytecode == "both" else (args.bytecode,):
        rows += measure(args.word, args.runs, bytecode)
    print(f"after: {load()}")
    headers = ["command", "bytecode", "wall median ms", "wall p95 ms", "CPU median ms"]
    print_table(f"{args.runs} runs each", headers, rows)


if __name__ == "__main__":
    main()
