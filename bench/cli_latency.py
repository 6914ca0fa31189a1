"""How fast `ingest` answers from the shell (issue 60: `ingest search` <= 0.3 s wall for a
one-word query on the embedded server, idle machine, median of 20).

Each command runs --runs times (default 20) as its own process, the commands taking turns
round by round so that all see the same load: `ingest --help`; `ingest search WORD` in the
default mode (hybrid with the default embedder: the query is embedded); `ingest search WORD
--mode lexical`; the same two with `--no-server`; and `python -c "import
ingestion_pipeline.cli"`, whose import is timed inside the interpreter. Wall time is the
parent's clock around each run; CPU is the child's user + system time (getrusage), which load
inflates less than wall.

The searches without `--no-server` take the path users get: answered by the resident search
process (docs/cli.md, "The resident search process"), which an untimed first search starts
and which is waited for before the runs; its status file's count of the searches it answered
proves it answered every timed one. Its CPU is not the child's, so that column shows the
client's only. `--no-server` is the search in its own process (INGEST_SEARCH_SERVER=off).
The resident processes live in a runtime folder of this run's own (XDG_RUNTIME_DIR) and are
stopped at the end.

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
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import command_line, median, percentile, print_table

ROOT = Path(__file__).resolve().parents[1]
INGEST = str(Path(sys.executable).with_name("ingest"))
IMPORT_TIMER = "import time; t = time.perf_counter(); import ingestion_pipeline.cli; print(time.perf_counter() - t)"


RESIDENT = "(resident)"


def commands(word: str) -> dict[str, list[str]]:
    lexical = [INGEST, "search", word, "--mode", "lexical"]
    return {
        "ingest --help": [INGEST, "--help"],
        f"ingest search {word} {RESIDENT}": [INGEST, "search", word],
        f"ingest search {word} --mode lexical {RESIDENT}": lexical,
        f"ingest search {word} --no-server": [INGEST, "search", word, "--no-server"],
        f"ingest search {word} --mode lexical --no-server": [*lexical, "--no-server"],
        "import ingestion_pipeline.cli": [sys.executable, "-P", "-c", IMPORT_TIMER],  # -P: the installed package
    }


def environment(bytecode: str, cache: Path, runtime: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(cache), XDG_RUNTIME_DIR=str(runtime))
    env.pop("INGEST_SEARCH_SERVER", None)  # the default: on
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
    with (
        tempfile.TemporaryDirectory(prefix="cli-latency-pycache-") as cache,
        tempfile.TemporaryDirectory(prefix="cli-latency-run-") as runtime,
    ):
        env = environment(bytecode, Path(cache), Path(runtime))
        todo = commands(word)
        try:
            # untimed: fills the cache, starts the resident process (waited for), and checks
            # that it answers what the search in its own process prints
            hits = run_once([INGEST, "search", word, "--json", "--no-server"], env)[2]
            if hits.strip() == "[]":
                sys.exit(f"`ingest search {word}` finds nothing here: index the samples first (make demo)")
            run_once([INGEST, "search", word, "--json"], env)
            resident(Path(runtime))
            if run_once([INGEST, "search", word, "--json"], env)[2] != hits or served(Path(runtime)) != 1:
                sys.exit("the resident search process did not answer what the search prints in its own process")
            for argv in todo.values():
                run_once(argv, env)
            before = served(Path(runtime))
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
            answered = served(Path(runtime)) - before
            if answered != runs * sum(RESIDENT in name for name in todo):
                sys.exit(f"the resident search process answered {answered} of the timed searches, not all")
        finally:
            stop_resident(Path(runtime))
    rows: list[list[object]] = []
    for name in todo:
        rows.append(
            [name, bytecode, *(f"{x * 1000:.0f}" for x in _stats(walls[name])), f"{median(cpus[name]) * 1000:.0f}"]
        )
    rows.append(["(the import alone, in-process)", bytecode, *(f"{x * 1000:.0f}" for x in _stats(imports)), ""])
    return rows


def statuses(runtime: Path) -> list[dict[str, int]]:
    """The resident search processes' status files (pid, searches answered)."""
    return [json.loads(path.read_text()) for path in (runtime / "ingestion-pipeline").glob("search-*.json")]


def resident(runtime: Path, timeout: float = 60) -> None:
    """Wait until the one resident search process listens."""
    deadline = time.monotonic() + timeout
    while len(statuses(runtime)) != 1:
        if time.monotonic() > deadline:
            sys.exit(f"no resident search process after {timeout} s (its log: {runtime}/ingestion-pipeline/*.log)")
        time.sleep(0.05)


def served(runtime: Path) -> int:
    [status] = statuses(runtime)
    return status["served"]


def stop_resident(runtime: Path) -> None:
    for status in statuses(runtime):
        os.kill(status["pid"], signal.SIGTERM)
    deadline = time.monotonic() + 30
    while statuses(runtime) and time.monotonic() < deadline:  # each removes its file as it leaves
        time.sleep(0.05)


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
