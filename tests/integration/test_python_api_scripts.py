"""Issue 61: the Python API needs no `if __name__ == "__main__":` guard of its caller. The
README's `Index` snippet and docs/python.md's walkthrough each run, exactly as written, as a
plain script (`python x.py`), as `python -c`, as a program read from standard input (how a
shell pipes one), in a Jupyter kernel (a notebook of the blocks, run by nbclient) and in a
Dagster op (`execute_in_process`, from a script). Each finishes, prints its output once, and
leaves no process behind (worker/child_start.py).

Before the fix a parsing child ran the caller's script again: the README's snippet enqueued
and drained once per child, and the walkthrough never ended (its children's own pools could
not start: a pool fault, a back-off, the same fault again). Every process a run starts
inherits a variable naming the run; once the run is over, none may be left. The timeouts
only guard against a hang."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import nbformat
import psutil
import psycopg
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
RUN_VARIABLE = "INGEST_TEST_SCRIPT_RUN"
HANG_GUARD_SECONDS = 240
BEGAN, ENDED = "[the program began]", "[the program ended]"

pytestmark = pytest.mark.one_server  # processes: the client's subject, run once


def python_blocks(page: str) -> list[str]:
    return BLOCK.findall((ROOT / page).read_text(encoding="utf-8"))


# How lines that each page's blocks print once begin (beside BEGAN and ENDED), and how many
# documents they leave indexed in a fresh database.
PAGES = {
    "README.md": ((), 4),
    "docs/python.md": (("{'new': 2}", "2 documents indexed", "no collection 'handbok'", "False"), 3),
}


class Printed(NamedTuple):
    out: str
    err: str  # for the failures' messages: the worker's faults are logged there

    def __str__(self) -> str:
        return f"{self.out}\n-- stderr, its end:\n{self.err[-3000:]}"


def framed(page: str) -> list[str]:
    """The page's blocks, with a first and a last line that say the program began and ended."""
    blocks = python_blocks(page)
    assert blocks, f"{page} has no python block"
    return [f"print({BEGAN!r})", *blocks, f"print({ENDED!r})"]


def as_script(blocks: list[str], tmp_path: Path, env: dict[str, str]) -> Printed:
    script = tmp_path / "walkthrough.py"
    script.write_text("\n".join(blocks))
    return run([sys.executable, str(script)], env)


def as_command(blocks: list[str], tmp_path: Path, env: dict[str, str]) -> Printed:
    return run([sys.executable, "-c", "\n".join(blocks)], env)


def from_standard_input(blocks: list[str], tmp_path: Path, env: dict[str, str]) -> Printed:
    return run([sys.executable, "-"], env, stdin="\n".join(blocks))


def in_a_dagster_op(blocks: list[str], tmp_path: Path, env: dict[str, str]) -> Printed:
    script = tmp_path / "dagster_job.py"
    body = textwrap.indent("\n".join(blocks), "    ")
    script.write_text(
        "from dagster import job, op\n\n\n"
        f"@op\ndef the_blocks():\n{body}\n\n\n"
        "@job\ndef python_api():\n    the_blocks()\n\n\n"
        "assert python_api.execute_in_process().success\n"
    )
    return run([sys.executable, str(script)], env)


def in_a_notebook(blocks: list[str], tmp_path: Path, env: dict[str, str]) -> Printed:
    """Each block a cell, run by a Jupyter kernel started in the checkout's folder."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(block) for block in blocks])
    client = NotebookClient(
        notebook, timeout=HANG_GUARD_SECONDS, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute(env={**env, "IPYTHONDIR": str(tmp_path / "ipython")})
    streams = [output for cell in notebook.cells for output in cell.get("outputs", []) if "name" in output]
    return Printed(*("".join(out["text"] for out in streams if out["name"] == name) for name in ("stdout", "stderr")))


def run(command: list[str], env: dict[str, str], stdin: str | None = None) -> Printed:
    result = subprocess.run(
        command, cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=HANG_GUARD_SECONDS
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return Printed(result.stdout, result.stderr)


WAYS: dict[str, Callable[[list[str], Path, dict[str, str]], Printed]] = {
    "script": as_script,
    "python -c": as_command,
    "stdin": from_standard_input,
    "notebook": in_a_notebook,
    "dagster op": in_a_dagster_op,
}


def processes_of(run_id: str) -> list[psutil.Process]:
    """The live processes whose environment names the run (zombies have none left)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(RUN_VARIABLE) == run_id and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture
def run_env(db_url: str) -> Iterator[dict[str, str]]:
    """The environment of one run: the test's fresh database and nothing else of the user's;
    at the end, every process of the run is gone (or killed, failing the test)."""
    run_id = uuid.uuid4().hex
    env = {key: value for key, value in os.environ.items() if key not in ("INGEST_DATABASE_URL", "INGEST_DATA_DIR")}
    env |= {"DATABASE_URL": db_url, RUN_VARIABLE: run_id}
    yield env
    deadline = time.monotonic() + 60  # a fork server exits once its parent has: not at once
    while (left := processes_of(run_id)) and time.monotonic() < deadline:
        time.sleep(0.1)
    commands = []
    for process in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            commands.append(" ".join(process.cmdline())[:120])
            process.kill()
    assert not left, f"processes left behind: {commands}"


# Each page each way; from standard input, the README's snippet only (the same start as a script's).
CASES = [(page, way) for page in PAGES for way in WAYS if (page, way) != ("docs/python.md", "stdin")]


@pytest.mark.parametrize(("page", "way"), CASES)
def test_the_python_blocks_run_once_and_end(page: str, way: str, run_env: dict[str, str], tmp_path: Path) -> None:
    printed = WAYS[way](framed(page), tmp_path, run_env)

    lines = printed.out.splitlines()
    expected, indexed = PAGES[page]
    for start in (BEGAN, ENDED, *expected):
        times = sum(line.startswith(start) for line in lines)
        assert times == 1, f"a line {start!r}… printed {times} times:\n{printed}"
    with psycopg.connect(run_env["DATABASE_URL"]) as conn:
        row = conn.execute("select count(*) from documents where index_generation_id is not null").fetchone()
    assert row == (indexed,), printed
