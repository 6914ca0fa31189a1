"""The optional extras (pyproject.toml: llama-index, langchain, mcp, metrics): when the code of one
runs without its packages, one line that names the extra and a command that installs them
anywhere. `pip install 'ingestion-pipeline[mcp]'` works only from a checkout or a built wheel
(the package is not on an index), so the command names the extra's own requirements, as this
installation's metadata lists them (docs/integrations.md)."""

from __future__ import annotations

import importlib.metadata
import re
import shlex

DISTRIBUTION = "ingestion-pipeline"


class MissingExtra(ModuleNotFoundError):
    """Code of an extra imported without the extra's packages installed (a ModuleNotFoundError,
    so `except ImportError` still catches it; `name` is the missing module)."""


def requirements(extra: str) -> list[str]:
    """The requirements the extra adds, as installed ("mcp<3,>=2.3"); [] if unknown."""
    try:
        listed = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [line.split(";")[0].strip() for line in listed if marker.search(line)]


def install_hint(extra: str) -> str:
    """`the mcp extra: pip install 'mcp<3,>=2.3'`."""
    needed = requirements(extra)
    command = f"pip install {' '.join(shlex.quote(r) for r in needed)}" if needed else f"pip install '.[{extra}]'"
    return f"the {extra} extra: {command}"


def missing_extra(what: str, extra: str, exc: ImportError) -> MissingExtra:
    """The error to raise, `from None`, when importing `what` met `exc` for lack of `extra`."""
    return MissingExtra(f"{what} needs {install_hint(extra)}", name=exc.name)
