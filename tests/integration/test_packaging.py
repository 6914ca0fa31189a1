"""A non-editable build (the wheel users install) carries the migrations and the SQL files,
and the migrator finds them from any working directory; it carries none of the test tooling
(ingest_testing, a distribution of its own that only the [test] extra brings)."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    [built] = out.glob("ingestion_pipeline-*.whl")
    return built


def repo_migrations() -> list[str]:
    """The versioned migration files (not the generated schema.sql beside them)."""
    return sorted(p.name for p in (REPO / "migrations").glob("2*.sql"))


def test_wheel_carries_migrations_and_sql(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())

    assert repo_migrations()
    for name in repo_migrations():
        assert f"ingestion_pipeline/migrations/{name}" in names
    for filename in ("queries.sql", "leases.sql", "generations.sql", "acks.sql", "batches.sql"):
        assert f"ingestion_pipeline/db/sql/{filename}" in names
    assert "ingestion_pipeline/db/sql/ledger.sql" in names
    assert "ingestion_pipeline/db/sql/catalog.sql" in names
    # check-drift from an installed package needs the manifest
    assert "ingestion_pipeline/migrations/drift-manifest.json" in names


def test_wheel_carries_no_test_tooling(wheel):
    """`pip install .` installs the package alone: no test server, no corpus builder."""
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    [dist_info] = {name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info")}

    assert {name.split("/")[0] for name in names} == {"ingestion_pipeline", dist_info}
    tooling_files = [
        name
        for name in names
        if name.startswith("ingestion_pipeline/testing/")
        or "/converted/" in name
        or Path(name).name in {"openai_server.py", "converters.py", "scans.py"}
    ]
    assert tooling_files == []
    # The tooling's own files are where the wheel would have taken them from, had it listed them.
    assert (REPO / "testing" / "ingest_testing" / "openai_server.py").is_file()
    # Nor does the package require it, with or without extras: make install installs it beside.
    metadata = email.message_from_bytes(archive.read(f"{dist_info}/METADATA"))
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist", [])]
    assert not [r for r in requirements if r.name == "ingestion-pipeline-testing"]


def test_installed_wheel_finds_its_migrations_from_any_folder(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    code = (
        f"import sys; sys.path.insert(0, {str(site)!r})\n"
        "import ingestion_pipeline.db.migrate as m\n"
        "from ingestion_pipeline.db.queries import query, sql_text\n"
        "print(m.__file__)\n"
        "print(m.default_migrations_dir())\n"
        "print(len(m.discover(m.default_migrations_dir())))\n"
        "print(bool(query('ledger_rows')) and 'ingest_schema_migrations' in sql_text('ledger.sql'))\n"
        "import importlib.util\n"
        "print(importlib.util.find_spec('ingestion_pipeline.testing') is None)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr
    module_file, folder, count, sql_ok, no_testing = result.stdout.strip().splitlines()
    assert Path(module_file).resolve().is_relative_to(site.resolve()), "the editable checkout shadowed the wheel"
    assert Path(folder).resolve() == (site / "ingestion_pipeline" / "migrations").resolve()
    assert int(count) == len(repo_migrations())
    assert sql_ok == "True"
    assert no_testing == "True", "the installed wheel has an ingestion_pipeline.testing package"
