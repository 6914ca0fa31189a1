"""Dagster started the two ways users start it, on a scratch embedded server:

- plain `dagster dev` in the checkout with no environment set (the first thing a Dagster
  user types) loads the location with the asset, its checks, the jobs, sensors and schedule;
- SIGINT to `ingest ui`'s pid (not its group) stops every process it started, and it started
  without Dagster's warning about the checkout's dagster.yaml.
Everything started is stopped."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import psutil
import pytest

from ingestion_pipeline.db import embedded
from tests.orchestration.live_dagster import BIN, LiveDagster, clean_env, gone, port_open


def test_plain_dagster_dev_in_the_checkout_loads_the_location(tmp_path):
    env = clean_env(tmp_path / "data")
    live = LiveDagster.start([str(BIN / "dagster"), "dev"], env=env, log_path=tmp_path / "dev.log")
    try:
        repository = live.repository()
        assert [node["assetKey"]["path"] for node in repository["assetNodes"]] == [["document_index"], ["source_sync"]]
        assert {job["name"] for job in repository["jobs"]} >= {
            "ingest_documents",
            "check_document_index",
            "janitor",
            "refresh_batch_status",
        }
        assert {s["name"] for s in repository["sensors"]} == {
            "import_batch_sensor",
            "batch_status_sensor",
            "index_totals_sensor",
            "failed_drain_run_sensor",
            "sync_source_sensor",
        }
        assert [s["name"] for s in repository["schedules"]] == ["janitor_schedule"]
    finally:
        os.killpg(live.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
        try:
            live.proc.wait(timeout=60)
        finally:
            live.kill_everything()
            embedded.stop(tmp_path / "data")
    # dagster dev removed its temporary home (its own, named in its log: other tests running
    # in parallel make and remove theirs)
    [home] = re.findall(r"Using temporary directory (\S+) for storage", (tmp_path / "dev.log").read_text())
    assert ".tmp_dagster_home_" in home and not Path(home).exists()


# `ingest ui` sends SIGINT to Dagster's process group, and escalates to SIGTERM and SIGKILL what
# is left after 8.5 s (cli/process_group.py): the escalation bounds the stop, whatever Dagster
# does; the wait below is a deadline three times that bound (a hang), not a measure of it.
STOP_DEADLINE_SECONDS = 30


# SIGINT here (a terminal's Ctrl-C); SIGTERM to a busy `ingest ui` (sensors ticking, runs
# launching) is test_daemon_e2e's last test, with the same checks: one start each (~20 s).
@pytest.mark.parametrize("signum", [signal.SIGINT])
def test_a_signal_to_ingest_ui_stops_every_process_it_started(tmp_path, signum):
    live = LiveDagster.start(
        [str(BIN / "ingest"), "ui"], env=clean_env(tmp_path / "data"), log_path=tmp_path / "ui.log"
    )
    try:
        family = psutil.Process(live.proc.pid).children(recursive=True)
        assert len(family) >= 3
        live.proc.send_signal(signum)  # the pid only: Dagster runs in a process group of its own
        code = live.proc.wait(timeout=STOP_DEADLINE_SECONDS)
        # Dagster stopped on SIGINT, or was terminated, or (its teardown outlasting the grace
        # on loaded cores) killed
        assert code in (0, 128 + signal.SIGTERM, 128 + signal.SIGKILL), code
        assert gone(family) == []
        assert not port_open(live.port)
        # `dg dev` runs in Dagster's home, where its dagster.yaml is the one used: no warning that
        # the checkout's "will not be used" (issue 61), nor any other of Dagster's at the start
        log = re.sub(r"\x1b\[[0-9;]*m", "", (tmp_path / "ui.log").read_text())  # colours off
        assert "will not be used" not in log and " - WARNING - " not in log, log[-3000:]
    finally:
        if live.proc.poll() is None:
            live.kill_everything()
        embedded.stop(tmp_path / "data")
