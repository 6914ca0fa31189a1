"""One embedded server per user, whichever folder a command runs in (issue 48): the real
`ingest` console script run from several folders with the same user data folder
(XDG_DATA_HOME, which platformdirs reads) starts one server there, says where once, and every
later command, and the Python API (`Index.open()`), reuses it. Nothing is mocked: the servers are real."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingestion_pipeline import Index
from ingestion_pipeline.db import embedded
from ingestion_pipeline.db.connection import resolve_database_url
from ingestion_pipeline.settings import load_settings
from tests.helpers import postmasters

INGEST = Path(sys.executable).parent / "ingest"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A user's XDG_DATA_HOME of the test's own; its embedded server is stopped after."""
    folder = tmp_path / "home"
    try:
        yield folder
    finally:
        if embedded.pgdata_path(folder / "ingestion-pipeline").exists():
            embedded.stop(folder / "ingestion-pipeline")


def ingest(cwd: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`ingest ARGS` in `cwd` with nothing set but the user's data home (and no vectors)."""
    cwd.mkdir(parents=True, exist_ok=True)
    clean = {k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")}
    clean.update(XDG_DATA_HOME=str(home), INGEST_EMBEDDER="none", INGEST_SEARCH_SERVER="off", **env)
    return subprocess.run([str(INGEST), *args], cwd=cwd, env=clean, capture_output=True, text=True, timeout=180)


def data_folders(root: Path) -> list[Path]:
    """Every PostgreSQL data directory under `root`."""
    return sorted(version.parent for version in root.rglob("PG_VERSION") if version.parent.name == "pgdata")


def test_commands_in_different_folders_share_one_server(tmp_path, home, monkeypatch, capsys):
    folder = home / "ingestion-pipeline"
    pgdata = embedded.pgdata_path(folder)

    # A fresh folder: the server starts in the user's data folder, one line says where; the
    # pending-migrations error names the database and that folder.
    first = ingest(tmp_path / "notebooks", home, "search", "x")
    assert first.returncode == 1, first
    started, error = first.stderr.splitlines()
    assert started.startswith(f"ingest: started the embedded PostgreSQL in {folder} (postgresql://"), started
    assert error.startswith(f"ingest: error: the database 'postgres' of the embedded server in {folder} has "), error
    assert "pending migration(s)" in error
    [pid] = postmasters(pgdata)

    # Another folder migrates it (the checkout's `make demo` does the same), a third searches it.
    migrated = ingest(tmp_path / "checkout", home, "db", "migrate")
    assert migrated.returncode == 0 and migrated.stderr == "", migrated
    searched = ingest(tmp_path / "elsewhere" / "deep", home, "search", "x")
    assert searched.returncode == 0 and searched.stderr == "", searched

    status = ingest(tmp_path / "elsewhere", home, "db", "status")
    assert status.returncode == 0, status
    line = status.stdout.splitlines()[0]
    assert line.startswith("database: postgres@") and f"the embedded server in {folder} (the per-user default" in line
    assert line.endswith(f"running, pid {pid}"), line
    urls = {ingest(tmp_path / name, home, "db", "url").stdout for name in ("notebooks", "checkout", "elsewhere")}
    assert len(urls) == 1

    # The Python API, from yet another folder, gets the same server, and says nothing.
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv("INGEST_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_database_url(load_settings()) + "\n" in urls
    with Index.open() as index:
        assert index.url + "\n" in urls
        assert index.search("x") == []
    assert capsys.readouterr().err == ""

    assert postmasters(pgdata) == [pid], "a command started a second server"
    assert data_folders(tmp_path) == [pgdata], "a command made a data folder of its own"


def test_a_database_of_an_earlier_release_in_a_folder_is_named_not_used(tmp_path, home):
    """Releases before the per-user default kept a server in the nearest `.ingest`: it is
    left alone (no data is touched), and one line says how to keep using it."""
    project = tmp_path / "project"
    (project / ".ingest" / "pgdata").mkdir(parents=True)
    default = home / "ingestion-pipeline"

    status = ingest(project / "sub", home, "db", "status")
    assert status.returncode == 0, status
    assert status.stdout.startswith(f"database: the embedded server in {default} (the per-user default"), status.stdout
    assert "not running" in status.stdout
    [note] = status.stderr.splitlines()
    assert note.startswith(f"ingest: note: not using {project / '.ingest'} (a per-folder database of an earlier")
    assert note.endswith(f"INGEST_DATA_DIR={project / '.ingest'} keeps using the old one"), note

    kept = ingest(project / "sub", home, "db", "status", INGEST_DATA_DIR=str(project / ".ingest"))
    assert kept.returncode == 0 and kept.stderr == "", kept
    assert kept.stdout.startswith(f"database: the embedded server in {project / '.ingest'} (INGEST_DATA_DIR)")

    elsewhere = ingest(tmp_path / "other", home, "db", "status")
    assert elsewhere.returncode == 0 and elsewhere.stderr == "", elsewhere
    assert not default.exists(), "status starts nothing"
