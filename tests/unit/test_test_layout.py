"""The layout rules of tests/README.md that a parser can check: no test module imports another
(code two test modules share lives in a helper module: any name but test_*.py), and no bench
script imports the tests or edits sys.path (it imports the installed package)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _candidates(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dotted names a statement may import as modules, relative imports resolved from
    `package` (the importing module's package, e.g. "tests.race")."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    # `from tests.race import test_x` imports the module test_x: each name may be one.
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _test_module_in(name: str) -> str | None:
    """`tests.<…>.test_<…>` (cut after its first test_ part) when `name` is or lies in one."""
    parts = name.split(".")
    if parts[0] != "tests":
        return None
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("test_"):
            return ".".join(parts[: i + 1])
    return None


def imports_of_test_modules(source: str, package: str) -> list[str]:
    """`line N: tests.x.test_y` for each statement in `source` that imports a test module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            hits = [m for m in map(_test_module_in, _candidates(node, package)) if m]
            if hits:
                found.append(f"line {node.lineno}: {hits[0]}")
    return sorted(found, key=lambda hit: int(hit.split(":")[0].removeprefix("line ")))


def _package_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).parent.parts)


def test_no_test_module_imports_another():
    paths = sorted(TESTS.rglob("test_*.py"))
    assert Path(__file__).resolve() in paths and len({p.parent for p in paths}) > 5  # the glob found the suite
    offenders = [
        f"{path.relative_to(ROOT)} {hit}"
        for path in paths
        for hit in imports_of_test_modules(path.read_text(), _package_of(path))
    ]
    assert offenders == [], (
        "test modules import other test modules; move what they share into a helper module "
        "(tests/helpers.py, or one beside them; tests/README.md):\n" + "\n".join(offenders)
    )


@pytest.mark.parametrize(
    ("source", "package"),
    [
        ("from tests.race.test_lease_tokens import claim_one", "tests.race"),
        ("import tests.race.test_lease_tokens", "tests.unit"),
        ("import tests.race.test_lease_tokens as lease_tokens", "tests.unit"),
        ("from tests.race import test_lease_tokens", "tests.unit"),
        ("from .test_lease_tokens import claim_one", "tests.race"),
        ("from . import test_lease_tokens", "tests.race"),
        ("def body():\n    from ..race.test_lease_tokens import claim_one\n", "tests.unit"),
    ],
    ids=["from", "import", "import_as", "from_package_import", "relative", "relative_package", "inside_a_function"],
)
def test_each_form_of_importing_a_test_module_is_found(source, package):
    [found] = imports_of_test_modules(source, package)
    assert found.endswith(": tests.race.test_lease_tokens"), found


@pytest.mark.parametrize(
    "source",
    [
        "from tests.helpers import seed_job",
        "from tests.race import lease_token_cases",
        "from .artifact_fence_cases import WRITERS",
        "from tests.orchestration.live_dagster import gone",
        "import pytest",
    ],
)
def test_helper_modules_may_be_imported(source):
    assert imports_of_test_modules(source, "tests.race") == []


def bench_offences(source: str) -> list[str]:
    """`line N: …` for each import of the tests (or edit of sys.path) in a bench script."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = _candidates(node, "bench")
            if getattr(node, "level", 0) == 0 and any(name == "tests" or name.startswith("tests.") for name in names):
                found.append(f"line {node.lineno}: imports {names[0]}")
        elif isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
            found.append(f"line {node.lineno}: edits sys.path")
    return found


def test_the_benches_import_the_installed_package_not_the_tests():
    scripts = sorted((ROOT / "bench").glob("*.py"))
    assert len(scripts) > 5
    offenders = [f"{path.relative_to(ROOT)} {hit}" for path in scripts for hit in bench_offences(path.read_text())]
    assert offenders == [], "benches reach into the tests; share through the package instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "offence"),
    [
        ("from tests.relevance.corpus import load_queries", "imports tests.relevance.corpus"),
        ("import tests.faults.harness", "imports tests.faults.harness"),
        ("import sys\nsys.path.insert(0, '..')", "edits sys.path"),
    ],
)
def test_a_bench_that_reaches_into_the_tests_is_found(source, offence):
    [found] = bench_offences(source)
    assert found.endswith(offence), found
