"""`make lint` (run first by `make test`) fails on what it is there to catch: an import
against the layers (import-linter), an unannotated function (mypy, strict) and a tracked
file over 1 MB. Each is shown on a scratch copy, never on the checkout itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def scratch_copy(tmp_path: Path) -> Path:
    """The package and its pyproject.toml (which holds the contracts) in a folder of their own."""
    copy = tmp_path / "checkout"
    shutil.copytree(
        ROOT / "ingestion_pipeline",
        copy / "ingestion_pipeline",
        ignore=shutil.ignore_patterns("__pycache__", "migrations"),
    )
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def lint_imports(checkout: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(checkout), "PATH": str(BIN)},
        timeout=300,
    )


def test_the_layers_hold_and_an_import_against_them_breaks_the_contract(tmp_path):
    checkout = scratch_copy(tmp_path)
    assert lint_imports(checkout).returncode == 0
    (checkout / "ingestion_pipeline" / "db" / "upward.py").write_text(
        "from ingestion_pipeline.worker import loop  # the database layer reaching up into the worker\n"
    )
    broken = lint_imports(checkout)
    assert broken.returncode == 1
    assert "ingestion_pipeline.db is not allowed to import ingestion_pipeline.worker" in broken.stdout


def test_dagster_below_orchestration_breaks_the_contract(tmp_path):
    checkout = scratch_copy(tmp_path)
    (checkout / "ingestion_pipeline" / "worker" / "dagster_inside.py").write_text("import dagster\n")
    broken = lint_imports(checkout)
    assert broken.returncode == 1
    assert "ingestion_pipeline.worker.dagster_inside -> dagster" in broken.stdout


def test_the_package_importing_the_test_tooling_breaks_the_contract(tmp_path):
    """ingest_testing is installed by the [test] extra only: an import of it from the package
    would fail in users' installs."""
    checkout = scratch_copy(tmp_path)
    (checkout / "ingestion_pipeline" / "search" / "fake_server.py").write_text("import ingest_testing.openai_server\n")
    broken = lint_imports(checkout)
    assert broken.returncode == 1
    assert "ingestion_pipeline.search.fake_server -> ingest_testing" in broken.stdout


def test_the_health_checks_import_one_way_and_the_worker_never_imports_them(tmp_path):
    """The index's checks (`ingest health`, the asset's checks) live in health/: what a check
    is (check.py) under the checks (queue.py, vectors.py), under their runner; the worker,
    which never runs them, is a sibling layer that may not import them."""
    checkout = scratch_copy(tmp_path)
    package = checkout / "ingestion_pipeline"
    assert not (package / "worker" / "index_checks.py").exists()
    assert not (package / "worker" / "vector_checks.py").exists()
    (package / "health" / "check.py").write_text(
        (package / "health" / "check.py").read_text() + "\nfrom ingestion_pipeline.health import vectors\n"
    )
    broken = lint_imports(checkout)
    assert broken.returncode == 1
    assert "ingestion_pipeline.health.check -> ingestion_pipeline.health.vectors" in broken.stdout
    checkout = scratch_copy(tmp_path / "again")
    (checkout / "ingestion_pipeline" / "worker" / "checking.py").write_text("from ingestion_pipeline import health\n")
    broken = lint_imports(checkout)
    assert broken.returncode == 1
    assert "ingestion_pipeline.worker is not allowed to import ingestion_pipeline.health" in broken.stdout


def mypy(checkout: Path, cache: Path) -> subprocess.CompletedProcess:
    """mypy as `make lint` runs it: its settings (strict, the files) from the copy's pyproject.toml."""
    return subprocess.run(
        [str(BIN / "mypy"), "--cache-dir", str(cache)],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={"PATH": str(BIN)},
        timeout=300,
    )


def test_the_type_checker_refuses_an_unannotated_function(tmp_path):
    """The project's mypy settings (pyproject.toml) on a one-module package: annotated it
    passes, unannotated it fails. (The package itself is checked by `make lint`.)"""
    checkout = tmp_path / "checkout"
    (checkout / "ingestion_pipeline").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    (checkout / "ingestion_pipeline" / "__init__.py").write_text("")
    (checkout / "testing" / "ingest_testing").mkdir(parents=True)  # the test tooling, also in mypy's files
    (checkout / "testing" / "ingest_testing" / "__init__.py").write_text("")
    module = checkout / "ingestion_pipeline" / "untyped.py"
    module.write_text("def f(x: int) -> int:\n    return x\n")
    assert mypy(checkout, tmp_path / "cache").returncode == 0
    module.write_text("def f(x):\n    return x\n")
    broken = mypy(checkout, tmp_path / "cache")
    assert broken.returncode == 1
    assert (
        "ingestion_pipeline/untyped.py:1: error: Function is missing a type annotation  [no-untyped-def]"
        in broken.stdout
    )


def test_a_tracked_file_over_1_mb_fails_the_size_check(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "small.txt").write_text("fine\n")
    (repo / "tool.whl").write_bytes(b"\0" * (1024 * 1024 + 1))
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    check = [sys.executable, str(ROOT / "tools" / "check_file_sizes.py"), "--root", str(repo)]

    oversized = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert oversized.returncode == 1
    assert "tool.whl: 1,048,577 bytes, over the 1,048,576-byte limit" in oversized.stderr
    subprocess.run([*git, "rm", "-q", "--cached", "tool.whl"], cwd=repo, check=True)
    assert subprocess.run(check, capture_output=True, timeout=60).returncode == 0
