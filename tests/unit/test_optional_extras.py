"""Issue 49's integrations are optional extras: `pip install ingestion-pipeline` (or `pip
install .`) without them pulls none of their libraries, and neither `import
ingestion_pipeline` nor `ingest --help` imports one, even where they are installed (here:
the `test` extra installs them all). Each extra pulls only its framework's core package.

Another integration adds its extra's row to EXTRAS."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
DISTRIBUTION = PYPROJECT["project"]["name"]

# extra -> the one distribution it pulls, and the top-level module that distribution installs
EXTRAS = {
    "llama-index": ("llama-index-core", "llama_index"),
    "langchain": ("langchain-core", "langchain_core"),
    "mcp": ("mcp", "mcp"),
    "metrics": ("prometheus-client", "prometheus_client"),
}
# what the package imports only when asked: the extras' modules, and their frameworks' others
MODULES = (*(module for _, module in EXTRAS.values()), "langchain", "mcp", "prometheus_client", "opentelemetry")
# the distributions that must not come with a plain install: the extras' and their umbrellas
FORBIDDEN = {canonicalize_name(name) for name in (*(dist for dist, _ in EXTRAS.values()), "llama-index", "langchain")}
# what `ingest mcp` says where its extra is not installed (the SDK hidden from the import system)
WITHOUT_THE_SDK = """
import sys
sys.modules["mcp"] = None  # `import mcp` raises ImportError, as where the extra is not installed
from ingestion_pipeline.cli import main
sys.exit(main(["mcp", "--database-url", "postgresql://postgres@127.0.0.1:1/nope"]))
"""


def requirement_names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(text).name) for text in requirements}


def test_the_base_dependencies_list_no_integration() -> None:
    base = requirement_names(PYPROJECT["project"]["dependencies"])
    assert base & FORBIDDEN == set()


@pytest.mark.parametrize(("extra", "package"), [(extra, dist) for extra, (dist, _) in EXTRAS.items()])
def test_each_extra_pulls_only_its_core_package_and_the_tests_install_it(extra: str, package: str) -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert requirement_names(extras[extra]) == {canonicalize_name(package)}
    assert canonicalize_name(package) in requirement_names(extras["test"])  # `make test` runs its tests


def base_closure(name: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """Every distribution a plain install of `name` (with `extras`) brings, transitively, as
    the installed distributions' metadata says (each requirement's markers evaluated here)."""
    seen: set[str] = set()
    todo = [(canonicalize_name(name), extras)]
    while todo:
        current, wanted = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            requires = metadata.distribution(current).requires or []
        except metadata.PackageNotFoundError:
            continue  # a requirement of another platform or Python: not installed, not pulled
        for text in requires:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *wanted}):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return seen


def test_a_plain_install_pulls_none_of_them_transitively() -> None:
    """`pip install .`: the package's requirements without an extra, and theirs, recursively."""
    pulled = base_closure(DISTRIBUTION)
    assert {"dagster", "psycopg", "wordllama"} <= pulled  # the walk reached the dependencies
    assert pulled & FORBIDDEN == set()
    # the walk sees an extra's packages when the extra is asked for
    assert canonicalize_name("llama-index-core") in base_closure(DISTRIBUTION, frozenset({"llama-index"}))
    assert canonicalize_name("mcp") in base_closure(DISTRIBUTION, frozenset({"mcp"}))


LOADED = f"""
import sys
frameworks = {MODULES!r}
print(sorted({{name.split(".")[0] for name in sys.modules}} & set(frameworks)))
"""


@pytest.mark.parametrize(
    "code",
    [
        "import ingestion_pipeline, ingestion_pipeline.api, ingestion_pipeline.integrations",
        "from ingestion_pipeline import Index",
        "import ingestion_pipeline.cli",
        "from ingestion_pipeline.cli import main\ntry:\n    main(['metrics', '--help'])\nexcept SystemExit:\n    pass",
    ],
)
def test_importing_the_package_imports_no_framework(code: str) -> None:
    for _, module in EXTRAS.values():  # installed here (the test extra): their absence would prove nothing
        assert subprocess.run([sys.executable, "-c", f"import {module}"], check=False).returncode == 0
    ran = subprocess.run([sys.executable, "-c", code + "\n" + LOADED], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "[]"  # the last line: the probe's (before it: help)


def test_ingest_help_imports_no_framework() -> None:
    """The installed `ingest` script, run as users run it, with Python's import log."""
    script = Path(sys.executable).with_name("ingest")
    ran = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert "usage: ingest" in ran.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in ran.stderr.splitlines() if line.startswith("import time:")}
    assert "ingestion_pipeline.cli" in imported  # the log is read
    assert {name for name in imported if name.split(".")[0] in MODULES} == set()


def test_ingest_mcp_without_its_extra_says_how_to_install_it() -> None:
    ran = subprocess.run([sys.executable, "-c", WITHOUT_THE_SDK], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1 and ran.stdout == ""
    # the extra's own requirement: `pip install 'ingestion-pipeline[mcp]'` works in a checkout only (issue 61)
    assert ran.stderr == "ingest: error: ingest mcp needs the mcp extra: pip install 'mcp<3,>=2.3'\n"


def test_ingest_metrics_without_its_extra_says_how_to_get_it() -> None:
    """As if prometheus_client were not installed (None in sys.modules: its import fails)."""
    code = (
        "import sys\nsys.modules['prometheus_client'] = None\nfrom ingestion_pipeline.cli import main\n"
        "sys.exit(main(['metrics', '--database-url', 'postgresql://postgres@127.0.0.1:1/nope']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "ingest: error: `ingest metrics` needs the metrics extra: pip install 'prometheus-client<1,>=0.20'"
    ]


@pytest.mark.parametrize(
    ("module", "framework", "message"),
    [
        ("llama_index", "llama_index", "the llama-index extra: pip install 'llama-index-core<0.15,>=0.12'"),
        ("langchain", "langchain_core", "the langchain extra: pip install 'langchain-core<2,>=0.3'"),
    ],
)
def test_a_retriever_without_its_extra_is_one_line_naming_it(module: str, framework: str, message: str) -> None:
    """Not a ModuleNotFoundError from inside the framework's import: the extra and how to install it
    anywhere (issue 61); still an ImportError, so `except ImportError` code keeps working."""
    code = (
        f"import sys\nsys.modules[{framework!r}] = None\n"
        f"try:\n    import ingestion_pipeline.integrations.{module}\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc.name)\n"
        f"import ingestion_pipeline.integrations.{module}\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 1 and done.stdout.startswith(f"MissingExtra {framework}")  # the module not found
    last = done.stderr.splitlines()[-1]
    assert last == f"ingestion_pipeline.extras.MissingExtra: ingestion_pipeline.integrations.{module} needs {message}"
    assert "During handling" not in done.stderr and f"{framework}/" not in done.stderr


@pytest.mark.parametrize(
    ("extra", "page"),
    [("llama-index", "integrations.md"), ("mcp", "mcp.md"), ("metrics", "metrics.md")],
)
def test_the_docs_install_an_extra_by_its_own_requirement(extra: str, page: str) -> None:
    """`pip install 'ingestion-pipeline[x]'` finds nothing outside a checkout (the package is not on
    an index, issue 61): the pages install the extra's requirement as pyproject.toml has it."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    [requirement] = PYPROJECT["project"]["optional-dependencies"][extra]
    assert f"pip install '{requirement}'" in text
    assert f"pip install '{DISTRIBUTION}[" not in text.replace(f"`pip install '{DISTRIBUTION}[llama-index]'` finds", "")
