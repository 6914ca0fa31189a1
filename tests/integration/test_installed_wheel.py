"""The wheel of `make dist`, installed as a user outside a checkout installs it (issue 61, item
6): in a fresh virtual environment, run from another folder, `ingest` migrates a database,
indexes a file (the default embedder's model read from its package) and finds it; without an
extra, a retriever or `ingest mcp` says in one line how to install it, and the wheel with the
extra, as docs/integrations.md installs it, brings the retriever.

uv makes the environment and installs from its cache (seconds; the packages `make install`
brought are there); offline first, then from the index. Where neither can install it (no cache,
no network), the test is skipped, saying so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")
# What says the index or the network could not be reached (uv's words), as opposed to a failure of ours.
UNREACHABLE = ("offline", "network", "connect", "dns", "timed out", "failed to fetch", "not found in the cache")


def uv(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(UV), *args], capture_output=True, text=True, timeout=timeout, check=False)


def install(python: Path, requirement: str) -> None:
    """Into the venv of `python`: offline from uv's cache, else from the index, else skip."""
    for mode in (["--offline"], []):
        done = uv("pip", "install", "--quiet", *mode, "--python", str(python), requirement)
        if done.returncode == 0:
            return
    if any(word in done.stderr.lower() for word in UNREACHABLE):
        pytest.skip(f"uv could not install {requirement} (no cache, no index): {done.stderr.strip()[-300:]}")
    raise AssertionError(done.stderr)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if not UV.exists():
        pytest.skip(f"uv is not installed beside {sys.executable} (make install installs it)")
    out = tmp_path_factory.mktemp("dist")
    # -o: the checkout's environment is not remade here (a pyproject.toml edited since would)
    built = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "dist", f"DIST={out}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert len(list(out.glob("ingestion_pipeline-*.tar.gz"))) == 1
    [found] = out.glob("ingestion_pipeline-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("user") / "venv"
    made = uv("venv", "--quiet", "--python", sys.executable, str(folder))
    assert made.returncode == 0, made.stderr
    python = folder / "bin" / "python"
    install(python, str(wheel))
    return folder


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """As a user's shell: none of the suite's or the checkout's settings, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("INGEST_", "PYTHON", "VIRTUAL_ENV"))}
    env.pop("DATABASE_URL", None)
    env.update(HOME=str(tmp_path / "home"), INGEST_SEARCH_SERVER="off", **extra)  # no resident search left behind
    return env


@pytest.mark.one_server  # the installed package is the subject, not the server
def test_the_installed_wheel_indexes_and_searches_from_another_folder(venv, empty_db_url, tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(REPO / "samples" / "postgres-leases.md", work / "leases.md")
    ingest = str(venv / "bin" / "ingest")
    env = user_env(tmp_path, DATABASE_URL=empty_db_url)

    def run(*args: str) -> str:
        done = subprocess.run([ingest, *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    assert run("--help").startswith("usage: ingest")
    located = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import ingestion_pipeline; print(ingestion_pipeline.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert Path(located.stdout.strip()).is_relative_to(venv), "the checkout's package was imported, not the wheel's"
    run("db", "migrate")  # the migrations, from the wheel
    assert "new" in run("enqueue", "leases.md")
    drained = json.loads(run("work", "--drain", "--json"))
    assert (drained["completed"], drained["failed"]) == (1, 0), drained
    found = run("search", "lease fencing")  # hybrid: the default embedder's vectors too
    assert "leases.md" in found and "Why fencing matters" in found, found
    run("db", "check-drift")  # the schema's manifest, from the wheel
    run("health")


@pytest.mark.parametrize(
    ("code", "extra", "requirement"),
    [
        ("import ingestion_pipeline.integrations.llama_index", "llama-index", "llama-index-core<0.15,>=0.12"),
        ("import ingestion_pipeline.integrations.langchain", "langchain", "langchain-core<2,>=0.3"),
        ("import sys; from ingestion_pipeline.cli import main; sys.exit(main(['mcp']))", "mcp", "mcp<3,>=2.3"),
    ],
)
def test_without_an_extra_one_line_says_how_to_install_it(venv, tmp_path, code, extra, requirement):
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        env=user_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(f"needs the {extra} extra: pip install '{requirement}'"), done.stderr
    # a command that works where this wheel was installed: its requirement is there to be installed
    assert "ingestion-pipeline[" not in done.stderr


def test_the_wheel_with_an_extra_as_the_docs_install_it(wheel, tmp_path):
    folder = tmp_path / "venv"
    assert uv("venv", "--quiet", "--python", sys.executable, str(folder)).returncode == 0
    python = folder / "bin" / "python"
    install(python, f"{wheel}[llama-index]")  # docs/integrations.md: pip install 'dist/<wheel>[langchain]'
    assert f"dist/{wheel.name}[" in (REPO / "docs" / "integrations.md").read_text()  # the page names this wheel
    code = "from ingestion_pipeline.integrations.llama_index import IngestionRetriever; print(IngestionRetriever)"
    done = subprocess.run([str(python), "-c", code], cwd=tmp_path, env=user_env(tmp_path), capture_output=True)
    assert done.returncode == 0, done.stderr
