"""`make test` (and so .ci/run) must fail when pytest runs no test (pytest exit 5)."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_test_fails_when_no_test_is_collected(tmp_path):
    # Its own --basetemp, inside this test's folder (without one it would get its own too:
    # tests/session_temp.py), so nothing it leaves outlives the test.
    result = subprocess.run(
        [
            "make",
            "-s",
            "-o",
            "lint",  # not remade: the subject is pytest's exit 5 (lint runs first in the suite's own make test)
            "test",
            "PYTEST_XDIST=",  # one process: collecting one module is enough to find nothing
            # This module only (collecting the whole suite imports Dagster: 15 s); -k leaves no test.
            f"PYTEST_ARGS={Path(__file__).relative_to(ROOT)} -k no_test_has_this_name_ci_guard -p no:cacheprovider "
            f"--basetemp={tmp_path / 'nested'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
        timeout=600,
    )
    assert result.returncode != 0
    assert "no tests ran" in result.stdout + result.stderr or "deselected" in result.stdout
