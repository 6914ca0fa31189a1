"""`make lint`'s size budgets (tools/check_budgets.py): each rule fails on a scratch git
tree that breaks it and passes one within it, and an exception of its table is honored.
Never on the checkout itself (`make lint` checks that)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_budgets.py"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]


def load_tool():
    """The tool as a module (tools/ is not a package), to pass it an exceptions table."""
    spec = importlib.util.spec_from_file_location("check_budgets", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scratch_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run([*GIT, "add", "."], cwd=repo, check=True)
    return repo


def check(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), "--root", str(repo)], capture_output=True, text=True, timeout=60)


def lines(n: int) -> str:
    return "x = 1\n" * n


WITHIN = {
    "README.md": "a" * 10_240,
    "bench/README.md": "b" * 25_600,
    "ingestion_pipeline/__init__.py": "",
    "ingestion_pipeline/db/deep/module.py": lines(400),
    "bench/script.py": lines(400),
    # not budgeted: tests, docs, a bench's results, a helper below bench/
    "tests/test_long.py": lines(2000),
    "docs/long.md": "c" * 50_000,
    "bench/results/long.md": "d" * 50_000,
    "bench/data/generated.py": lines(2000),
}


def test_a_tree_within_every_budget_passes(tmp_path):
    done = check(scratch_tree(tmp_path, WITHIN))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("README.md", "a" * 10_241, "README.md: 10,241 bytes, over its budget of 10,240 bytes"),
        ("bench/README.md", "b" * 25_601, "bench/README.md: 25,601 bytes, over its budget of 25,600 bytes"),
        (
            "ingestion_pipeline/db/deep/module.py",
            lines(401),
            "ingestion_pipeline/db/deep/module.py: 401 lines, over its budget of 400 lines",
        ),
        ("bench/script.py", lines(401), "bench/script.py: 401 lines, over its budget of 400 lines"),
    ],
)
def test_one_file_over_its_budget_fails_the_check(tmp_path, name, text, message):
    done = check(scratch_tree(tmp_path, {**WITHIN, name: text}))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [message, "budgets and their exceptions: tools/check_budgets.py"]


def test_an_untracked_file_is_not_counted(tmp_path):
    repo = scratch_tree(tmp_path, WITHIN)
    (repo / "bench" / "scratch.py").write_text(lines(1000))
    assert check(repo).returncode == 0


def test_an_exception_raises_one_files_budget_and_is_reported_once_unneeded(tmp_path):
    tool = load_tool()
    repo = scratch_tree(tmp_path, {**WITHIN, "bench/script.py": lines(450)})
    exceptions = {"bench/script.py": (500, "one table of 450 lines")}
    assert tool.over_budget(repo, exceptions) == []
    assert tool.over_budget(repo, {"bench/script.py": (420, "too tight")}) == [
        "bench/script.py: 450 lines, over its budget of 420 lines"
    ]
    (repo / "bench" / "script.py").write_text(lines(300))
    assert tool.over_budget(repo, exceptions) == [
        "bench/script.py: 300 lines, within the 400-line budget: drop its exception"
    ]


def test_the_checkout_names_no_exception_it_does_not_need():
    """Every entry of the table names a tracked, budgeted file with a reason."""
    tool = load_tool()
    for name, (budget, why) in tool.EXCEPTIONS.items():
        assert (ROOT / name).is_file() and tool.measure(ROOT, name) is not None, name
        assert budget > 0 and why.strip(), name
