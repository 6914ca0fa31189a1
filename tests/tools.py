"""The Debian tools some tests drive (Tesseract, pandoc, LibreOffice): a test without them
is skipped on a developer's machine, naming what to install, and fails under CI, where
.ci/run installs them: a missing tool must not turn the format tests into silent skips."""

from __future__ import annotations

import os

import pytest


def require_tools(missing: list[str], what: str) -> None:
    if not missing:
        return
    message = f"{what} needs {', '.join(missing)}"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: .ci/run installs them")
    pytest.skip(message)
