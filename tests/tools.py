"""The system tools some tests drive (Tesseract, pandoc, LibreOffice, Chromium, PgBouncer, groff,
Ghostscript). `make test` installs them where it may (tools/system-tools.sh: root with apt-get);
elsewhere a test that needs a missing one is skipped, saying which, and the run ends with one
line naming what was skipped and the command that installs it (a pytest plugin: this module,
loaded by tests/conftest.py). Under CI (.ci/run) a missing tool fails the test instead where the
run could have installed it (root with apt-get, as tools/system-tools.sh installs): there it must
not turn tests into silent skips. A CI run as another user cannot install them (the script only
names them, exit 3), so its tests skip as anywhere else.

`hidden_tools_env` hides tools from a subprocess (a PATH without them, and the variable that
`find_tool` reads), so the skips are tested on a machine that has the tools."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

# Each command a test runs -> the Debian packages that bring it (tools/system-tools.sh installs them).
TOOLS: dict[str, str] = {
    "tesseract": "tesseract-ocr tesseract-ocr-eng",
    "pandoc": "pandoc",
    "soffice": "libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui",
    "chromium": "chromium",
    "pgbouncer": "pgbouncer",
    "groff": "groff",
    "ps2pdf": "ghostscript",
}
INSTALL_COMMAND = "sudo tools/system-tools.sh"
HIDDEN_VARIABLE = "INGEST_TESTS_HIDDEN_TOOLS"  # commands find_tool does not find (comma-separated)
_SKIP_REASON = re.compile(r"needs (?P<tools>[\w, -]+), not installed \(")
# Where Debian puts daemons (pgbouncer), often not on a non-root user's PATH.
_SBIN = ("/usr/sbin", "/sbin")


def find_tool(command: str) -> str | None:
    """The tool's path, on PATH or in an sbin folder; None when missing (or hidden)."""
    if command in os.environ.get(HIDDEN_VARIABLE, "").split(","):
        return None
    return shutil.which(command) or shutil.which(command, path=os.pathsep.join(_SBIN))


def missing(commands: Iterable[str]) -> list[str]:
    return [command for command in commands if find_tool(command) is None]


def require_tools(commands: Iterable[str], what: str) -> None:
    """Skip unless every command is found; fail instead under CI where this run could have
    installed it."""
    absent = missing(commands)
    if not absent:
        return
    message = f"{what} needs {', '.join(absent)}, not installed ({INSTALL_COMMAND} installs it)"
    if os.environ.get("CI") and could_install():
        pytest.fail(f"{message}; .ci/run installs them")
    pytest.skip(message)


def could_install() -> bool:
    """Whether tools/system-tools.sh installs what is missing in this run: root with apt-get."""
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def hidden_tools_env(hide: Iterable[str], folder: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) for a subprocess that has none of `hide`: PATH becomes
    one folder of links to every other program on PATH, and find_tool is told; CI is unset
    (the skips are the subject)."""
    hidden = set(hide)
    source = dict(os.environ if env is None else env)
    folder.mkdir(parents=True, exist_ok=True)
    for directory in source.get("PATH", "").split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            link = folder / program.name
            if program.name not in hidden and not link.exists() and not link.is_symlink():
                link.symlink_to(program)
    source.pop("CI", None)
    source["PATH"] = str(folder)
    source[HIDDEN_VARIABLE] = ",".join(sorted(hidden))
    return source


def skipped_tools(reasons: Iterable[str]) -> tuple[int, list[str]]:
    """How many of these skip reasons are a missing tool's, and which tools."""
    count, tools = 0, set()
    for reason in reasons:
        found = _SKIP_REASON.search(reason)
        if found:
            count += 1
            tools.update(tool.strip() for tool in found["tools"].split(","))
    return count, sorted(tools)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After pytest's own summary: the run's last line."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput"):  # an xdist worker: the controller says it
        return
    reasons = []
    for report in reporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reasons.append(longrepr[2] if isinstance(longrepr, tuple) else str(longrepr))
    count, tools = skipped_tools(reasons)
    if count:
        packages = " ".join(TOOLS.get(tool, tool) for tool in tools)
        reporter.write_line(
            f"skipped {count} test(s) that need {', '.join(tools)}, not installed here: "
            f"{INSTALL_COMMAND} installs them (as root: apt-get install {packages})",
            yellow=True,
            bold=True,
        )
