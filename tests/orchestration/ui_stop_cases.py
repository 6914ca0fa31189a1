"""`ingest ui` stopped the way users stop it, with or without a run in flight: shared by
tests/orchestration/test_ui_stop.py and bench/ui_stop.py.

The run in flight is a `refresh_batch_status` run that cannot finish by itself: it refreshes
a batch whose row `BlockedRun` keeps locked (FOR UPDATE, in an open transaction) through
the stop, so the stop finds it in flight whatever the timing, and only its interruption can
end it. It is known to be in flight once Dagster's run storage says STARTED and its
backend waits for the lock (pg_blocking_pids, read by a second connection: a transaction
sees one snapshot of pg_stat_activity)."""

from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass

import psutil
import psycopg
from psycopg.rows import dict_row

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.orchestration.instance import DAGSTER_DATABASE
from tests.orchestration.live_dagster import ROOT, LiveDagster, gone, port_open

REFRESH = """mutation ($config: RunConfigData) { launchRun(executionParams: {selector: {repositoryLocationName:
  "ingestion_pipeline", repositoryName: "__repository__", jobName: "refresh_batch_status"}, runConfigData: $config})
  { __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
TEMPORARY_HOME = re.compile(r"Using temporary directory (\S+) for storage")


def run_statuses(pipeline_url: str) -> dict[str, str]:
    """Every run in Dagster's run storage (the `dagster` database beside the pipeline's)."""
    with psycopg.connect(psycopg.conninfo.make_conninfo(pipeline_url, dbname=DAGSTER_DATABASE)) as conn:
        return dict(conn.execute("select run_id, status from runs").fetchall())


def temporary_homes(log_text: str) -> list[str]:
    """The temporary Dagster homes `dg dev` says it made (it makes one when DAGSTER_HOME is unset)."""
    return TEMPORARY_HOME.findall(log_text)


def checkout_leftovers() -> list[str]:
    return sorted(path.name for path in ROOT.glob(".tmp_dagster_home_*"))


@dataclass
class Stopped:
    code: int
    seconds: float
    left: list[int]  # pids of `ingest ui`'s processes still alive afterwards
    port_open: bool


def stop(live: LiveDagster, signum: signal.Signals, deadline: float = 30) -> Stopped:
    """`signum` to `ingest ui`'s pid (a terminal's Ctrl-C, `kill`, a service manager), and its
    exit. `deadline` only catches a hang: it is three times the stop's bound."""
    family = psutil.Process(live.proc.pid).children(recursive=True)
    started = time.monotonic()
    live.proc.send_signal(signum)
    code = live.proc.wait(timeout=deadline)
    seconds = time.monotonic() - started
    return Stopped(code, seconds, gone(family), port_open(live.port))


class BlockedRun:
    """A `refresh_batch_status` run of `live`'s Dagster, blocked on a batch row held locked
    here until `release()`."""

    def __init__(self, live: LiveDagster, pipeline_url: str):
        self.pipeline_url = pipeline_url
        self.holder = psycopg.connect(pipeline_url, autocommit=True, row_factory=dict_row)
        self.observer = psycopg.connect(pipeline_url, autocommit=True, row_factory=dict_row)
        created = IngestionRpc(self.observer, stale_after_seconds=300).create_batch("a run in flight at the stop")
        self.batch_id = str(created.batch_id)
        self.holder.execute("begin")
        self.holder.execute("select 1 from import_batches where id = %s for update", (self.batch_id,))
        config = {"ops": {"refresh_batches": {"config": {"batch_ids": [self.batch_id]}}}}
        launched = live.graphql(REFRESH, {"config": config})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        self.run_id: str = launched["run"]["runId"]

    def status(self) -> str | None:
        return run_statuses(self.pipeline_url).get(self.run_id)

    def wait_in_flight(self, live: LiveDagster, timeout: float = 180) -> None:
        live.wait_for("the run to start", lambda: self.status() == "STARTED", timeout=timeout, every=0.2)
        holder_pid = self.holder.info.backend_pid
        blocked = "select count(*) as n from pg_stat_activity where %s = any(pg_blocking_pids(pid))"
        live.wait_for(
            "the run to wait for the locked batch",
            lambda: self.observer.execute(blocked, (holder_pid,)).fetchone()["n"],
            timeout=timeout,
            every=0.2,
        )

    def release(self) -> None:
        self.holder.close()  # ends the transaction: the lock goes with it
        self.observer.close()
