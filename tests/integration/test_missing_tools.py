"""On a machine without the system tools (Tesseract, pandoc, LibreOffice, Chromium, PgBouncer,
groff, Ghostscript), as `make test` runs where it may not install them: the tests that need one
skip saying which, the run ends with one line naming what was skipped and the command that
installs it, and no other test depends on whether the tools are there (issue 61, item 9).
The tools are hidden from a pytest subprocess (tests/tools.py: hidden_tools_env), not uninstalled.
Also: a killed run's databases are dropped by the next session (tests/run_databases.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import defusedxml.ElementTree
import psycopg
import pytest
from psycopg import sql

from ingestion_pipeline.db.connection import connect
from tests import tools
from tests.conftest import _fresh_database
from tests.run_databases import Run, drop_abandoned
from tests.tools import INSTALL_COMMAND, TOOLS, hidden_tools_env

ROOT = Path(__file__).resolve().parents[2]

# Tests that once failed without Tesseract (their subject is not OCR) and must pass without it.
INDEPENDENT = [
    "tests/unit/test_processing_pdf.py::test_pdf_without_text_layer",
    "tests/unit/test_processing_detect.py::test_png_signature_followed_by_printable_bytes_is_a_damaged_image",
    "tests/integration/test_worker.py::test_bad_inputs_fail_clearly_and_affect_nothing_else",
    "tests/integration/test_hostile_formats.py::test_hostile_formats_end_within_the_limits_beside_normal_documents",
    "tests/unit/test_more_formats.py::test_without_tesseract_a_scan_fails_saying_how_to_get_it",
]
# One test per tool and kind of check, which must skip naming the tool.
NEEDING = {
    "tests/unit/test_more_formats.py::test_tiff_frames_are_pages_and_ocr_stops_at_max_pages": "tesseract",
    "tests/unit/test_pdf_groff.py::test_words_pdfium_runs_together_are_separated": "groff",
    "tests/orchestration/test_browser_harness.py::test_harness_sets_local_storage_waits_clicks_and_screenshots": (
        "chromium"
    ),
    "tests/integration/test_transaction_pooler.py::test_migrate_through_the_pooler_applies_everything_and_leaves_no_session_state": (  # noqa: E501
        "pgbouncer"
    ),
    "tests/integration/test_converted_formats.py": "pandoc",
}


def test_without_the_tools_their_tests_skip_naming_them_and_the_rest_pass(tmp_path):
    env = hidden_tools_env(TOOLS, tmp_path / "bin")
    env.pop("TEST_DATABASE_URL", None)  # the embedded server only: the tools, not the servers, are the subject
    report = tmp_path / "report.xml"
    options = ["-p", "no:cacheprovider", f"--junitxml={report}", f"--basetemp={tmp_path / 'run'}"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *options, *INDEPENDENT, *NEEDING],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = result.stdout
    assert result.returncode == 0, out[-6000:] + result.stderr[-3000:]
    outcomes: dict[str, list[tuple[str, str]]] = {}  # test module::name -> (outcome, message) per parameter
    for case in defusedxml.ElementTree.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        name = re.sub(r"\[.*\]$", "", case.get("name", ""))
        found = [
            (child.tag, child.get("message", "")) for child in case if child.tag in {"skipped", "failure", "error"}
        ]
        outcome = found[0] if found else ("passed", "")
        outcomes.setdefault(f"{module}::{name}", []).append(outcome)
        outcomes.setdefault(module, []).append(outcome)
    for test in INDEPENDENT:
        assert outcomes.get(test) and {kind for kind, _ in outcomes[test]} == {"passed"}, (test, outcomes.get(test))
    for test, tool in NEEDING.items():
        assert outcomes.get(test), test
        for outcome, message in outcomes[test]:
            assert outcome == "skipped" and re.search(rf"needs .*\b{tool}\b.*, not installed", message), (test, message)
    [summary] = [line for line in out.splitlines() if line.startswith("skipped ") and "not installed here" in line]
    for tool in ("chromium", "groff", "pandoc", "pgbouncer", "tesseract"):
        assert tool in summary
    assert INSTALL_COMMAND in summary and "apt-get install" in summary and "tesseract-ocr" in summary


def test_a_killed_runs_databases_are_dropped_and_no_other(pg_server):
    admin = pg_server.admin_url
    live, killed = Run(admin), Run(admin)
    names = {key: f"ingest_t_run_{key}_{uuid.uuid4().hex[:8]}" for key in ("live", "killed", "unmarked")}
    try:
        with connect(admin, autocommit=True) as conn:
            for key, name in names.items():
                conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
                if key != "unmarked":
                    (live if key == "live" else killed).mark(conn, name)
        killed.close()  # its lock goes as a killed process's does: with its connection

        drop_abandoned(admin)

        with connect(admin) as conn:
            rows = conn.execute("select datname from pg_database where datname = any(%s)", (list(names.values()),))
            left = {row["datname"] for row in rows.fetchall()}
        assert left == {names["live"], names["unmarked"]}
    finally:
        live.close()
        with connect(admin, autocommit=True) as conn:
            for name in names.values():
                conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


def test_make_test_installs_the_tools_through_the_script_ci_uses():
    makefile = (ROOT / "Makefile").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    script = (ROOT / "tools" / "system-tools.sh").read_text()
    assert re.search(r"^test: .*\$\(SYSTEM_TOOLS\)", makefile, re.M)
    assert "tools/system-tools.sh" in makefile and "apt-get install" not in ci and "make test" in ci
    assert INSTALL_COMMAND in script
    for packages in TOOLS.values():
        for package in packages.split():
            assert package in script, package
    assert os.access(ROOT / "tools" / "system-tools.sh", os.X_OK)


def test_the_script_as_a_user_without_the_tools_names_them_and_installs_nothing(tmp_path):
    """Not root (an `id` that says uid 1000): it only says what is missing; make test goes on (exit 3)."""
    env = hidden_tools_env(TOOLS, tmp_path / "bin")
    fake_id = tmp_path / "bin" / "id"
    fake_id.unlink()
    fake_id.write_text("#!/bin/sh\necho 1000\n")
    fake_id.chmod(0o755)
    done = subprocess.run(
        ["bash", str(ROOT / "tools" / "system-tools.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    for package in ("chromium", "tesseract-ocr", "pandoc", "libreoffice-writer-nogui", "groff", "ghostscript"):
        assert package in line
    assert INSTALL_COMMAND in line and "apt-get" not in done.stdout + done.stderr


@pytest.mark.parametrize("root", [True, False], ids=["root", "user"])
def test_under_ci_a_missing_tool_fails_only_where_the_run_could_install_it(monkeypatch, root):
    """CI as root (apt-get: .ci/run installs them) must not skip; CI as another user cannot
    install them (the script exits 3), so there the test skips as anywhere else."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv(tools.HIDDEN_VARIABLE, "tesseract")
    monkeypatch.setattr(os, "geteuid", lambda: 0 if root else 1000)
    monkeypatch.setattr(tools.shutil, "which", lambda command, path=None: f"/usr/bin/{command}")
    expected = pytest.fail.Exception if root else pytest.skip.Exception
    with pytest.raises(expected, match="needs tesseract, not installed"):
        tools.require_tools(["tesseract"], "OCR")


def test_a_database_taken_by_a_fixture_that_skips_for_a_missing_tool_is_dropped(pg_server):
    """A fixture `for url in _fresh_database(…)` whose body skips (a tool missing) before its
    yield: the database is dropped all the same (the pooler tests' fixture left one per test
    on TEST_DATABASE_URL's server). The drop is queued behind the tests: waited for here."""
    taken = []

    def fixture():
        for url in _fresh_database(pg_server, "template0"):
            taken.append(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
            pytest.skip("a test through PgBouncer needs pgbouncer, not installed")
            yield url

    with pytest.raises(pytest.skip.Exception):
        next(fixture())
    [name] = taken
    query = "select 1 from pg_database where datname = %s"
    deadline = time.monotonic() + 60
    with connect(pg_server.admin_url) as conn:
        while conn.execute(query, (name,)).fetchone() is not None:
            assert time.monotonic() < deadline, f"{name} was not dropped"
            time.sleep(0.1)
