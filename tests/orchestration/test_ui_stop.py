"""`ingest ui` stops cleanly (issue 48): SIGINT or SIGTERM to its pid ends it with status 0
(`dg dev` stopped by itself, no escalation to SIGTERM or SIGKILL), leaves none of its
processes and no open port, uses Dagster's home under the data folder rather than a
temporary one in the checkout, and a run in flight at the stop ends CANCELED, not FAILURE
(ingest_testing/ui_stop.py: a run blocked on a row lock the test holds through the stop).

Three starts of `ingest ui` on one scratch data folder (one embedded server). How long a
stop takes is bench/ui_stop.py's table, not an assertion here."""

from __future__ import annotations

import signal

import psutil
import pytest

from ingest_testing.ui_stop import BlockedRun, run_statuses, temporary_homes
from ingestion_pipeline.db import embedded
from ingestion_pipeline.orchestration.home import dagster_home
from tests.orchestration.live_dagster import BIN, LiveDagster, clean_env, gone, port_open

# Only a hang outlasts this: three times the stop's bound (cli/process_group.STOP_SECONDS).
HANG_SECONDS = 30


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui-stop") / "data"
    yield folder
    embedded.stop(folder)


@pytest.fixture
def live(data, tmp_path):
    server = LiveDagster.start([str(BIN / "ingest"), "ui"], env=clean_env(data), log_path=tmp_path / "ui.log")
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.kill_everything()


def assert_stops_cleanly(live: LiveDagster, signum: signal.Signals, data) -> None:
    family = psutil.Process(live.proc.pid).children(recursive=True)
    live.proc.send_signal(signum)  # its pid only, as a terminal's Ctrl-C, `kill` or a service manager
    code = live.proc.wait(timeout=HANG_SECONDS)
    log = live.log_tail(1_000_000)
    assert code == 0, log[-3000:]  # 143 or 137: the stop was escalated
    assert gone(family) == [] and not port_open(live.port)
    # Dagster's home is the data folder's: `dg dev` made no temporary one in the checkout
    assert temporary_homes(log) == [], log[-3000:]
    assert (dagster_home(data) / "dagster.yaml").is_file()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_ingest_ui_with_status_0_leaving_nothing(live, data, signum):
    assert_stops_cleanly(live, signum, data)
    assert "FAILURE" not in run_statuses(embedded.start(data)).values()


def test_a_run_in_flight_at_the_stop_ends_canceled_not_failed(live, data):
    url = embedded.start(data)  # already running: its URL
    run = BlockedRun(live.graphql, url)
    try:
        run.wait_in_flight()
        assert_stops_cleanly(live, signal.SIGTERM, data)
        # the batch row is still locked: the run ended because it was interrupted
        assert run.status() == "CANCELED"
    finally:
        run.release()
    assert f"run {run.run_id[:8]} interrupted by the stop: CANCELED" in live.log_tail(1_000_000)
    assert "FAILURE" not in run_statuses(url).values()
