"""The integrations' libraries are optional extras (issue 49): `pip install .` without extras
pulls none of them, and `import ingestion_pipeline` and `ingest --help` import none of them
(each checked in a fresh interpreter, whose sys.modules is the evidence)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# extra -> the distribution it pulls and the module that distribution provides
EXTRAS = {
    "metrics": ("prometheus-client", "prometheus_client"),
}
MODULES = sorted(module for _, module in EXTRAS.values())


def imported(code: str) -> list[str]:
    """The optional modules a fresh interpreter has imported after running `code`."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {MODULES!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 - our own probe's printed list


def requirement_name(requirement: str) -> str:
    name = requirement.split(";")[0]
    for stop in "[<>=!~ ":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-")


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]


def test_importing_the_package_imports_no_optional_library():
    assert imported("import ingestion_pipeline\nfrom ingestion_pipeline import Index") == []


@pytest.mark.parametrize("argv", [["--help"], ["metrics", "--help"]])
def test_the_commands_help_imports_no_optional_library(argv):
    code = f"from ingestion_pipeline.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    assert imported(code) == []


def test_the_base_dependencies_list_no_optional_library():
    project = pyproject()
    base = {requirement_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    for extra, (distribution, _) in EXTRAS.items():
        assert distribution not in base
        assert [requirement_name(r) for r in extras[extra]] == [distribution], extra  # its core package only
        assert distribution in {requirement_name(r) for r in extras["test"]}  # `make test` installs it


def test_ingest_metrics_without_its_extra_says_how_to_get_it():
    """As if prometheus_client were not installed (None in sys.modules: its import fails)."""
    code = (
        "import sys\nsys.modules['prometheus_client'] = None\nfrom ingestion_pipeline.cli import main\n"
        "sys.exit(main(['metrics', '--database-url', 'postgresql://postgres@127.0.0.1:1/nope']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "ingest: error: `ingest metrics` needs the metrics extra: pip install 'ingestion-pipeline[metrics]'"
    ]
