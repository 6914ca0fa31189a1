"""`ingest ui` stopped with a run in flight, and what to look at afterwards: shared by
tests/orchestration/test_ui_stop.py and bench/ui_stop.py.

The run in flight is a `refresh_batch_status` run that cannot finish by itself: it refreshes
a batch whose row `BlockedRun` keeps locked (FOR UPDATE, in an open transaction) through
the stop, so the stop finds it in flight whatever the timing, and only its interruption can
end it. It is known to be in flight once Dagster's run storage says STARTED and its
backend waits for the lock (pg_blocking_pids, read by a second connection: a transaction
sees one snapshot of pg_stat_activity)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.orchestration.instance import DAGSTER_DATABASE

REFRESH = """mutation ($config: RunConfigData) { launchRun(executionParams: {selector: {repositoryLocationName:
  "ingestion_pipeline", repositoryName: "__repository__", jobName: "refresh_batch_status"}, runConfigData: $config})
  { __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
TEMPORARY_HOME = re.compile(r"Using temporary directory (\S+) for storage")
GROUP_STOPPED = re.compile(r"every process stopped ([0-9.]+) s after the signal")

# GraphQL on the running webserver: (query, variables) -> the answer's data
GraphQL = Callable[[str, dict[str, Any]], dict[str, Any]]


def run_statuses(pipeline_url: str) -> dict[str, str]:
    """Every run in Dagster's run storage (the `dagster` database beside the pipeline's)."""
    with psycopg.connect(psycopg.conninfo.make_conninfo(pipeline_url, dbname=DAGSTER_DATABASE)) as conn:
        return dict(conn.execute("select run_id, status from runs").fetchall())


def temporary_homes(output: str) -> list[str]:
    """The temporary Dagster homes `dg dev` says it made (it makes one when DAGSTER_HOME is unset)."""
    return TEMPORARY_HOME.findall(output)


def group_seconds(output: str) -> float | None:
    """How long `ingest ui` says its processes took to stop after the signal."""
    found = GROUP_STOPPED.findall(output)
    return float(found[-1]) if found else None


def escalations(output: str) -> list[str]:
    """The signals `ingest ui` escalated to (SIGTERM, SIGKILL), as it says on stderr."""
    return re.findall(r"^still running: .*; (SIG[A-Z]+) to them$", output, re.MULTILINE)


def checkout_leftovers(checkout: Path) -> list[str]:
    return sorted(path.name for path in checkout.glob(".tmp_dagster_home_*"))


def poll(what: str, probe: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.2)


class BlockedRun:
    """A `refresh_batch_status` run, blocked on a batch row held locked here until `release()`."""

    def __init__(self, graphql: GraphQL, pipeline_url: str):
        self.pipeline_url = pipeline_url
        self.holder = psycopg.connect(pipeline_url, autocommit=True, row_factory=dict_row)
        self.observer = psycopg.connect(pipeline_url, autocommit=True, row_factory=dict_row)
        created = IngestionRpc(self.observer, stale_after_seconds=300).create_batch("a run in flight at the stop")
        self.batch_id = str(created.batch_id)
        self.holder.execute("begin")
        self.holder.execute("select 1 from import_batches where id = %s for update", (self.batch_id,))
        config = {"ops": {"refresh_batches": {"config": {"batch_ids": [self.batch_id]}}}}
        launched = graphql(REFRESH, {"config": config})["launchRun"]
        if launched["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"could not launch the run: {launched}")
        self.run_id: str = launched["run"]["runId"]

    def status(self) -> str | None:
        return run_statuses(self.pipeline_url).get(self.run_id)

    def wait_in_flight(self, timeout: float = 180) -> None:
        poll("the run to start", lambda: self.status() == "STARTED", timeout)
        blocked = "select count(*) as n from pg_stat_activity where %s = any(pg_blocking_pids(pid))"
        holder = self.holder.info.backend_pid

        def waits_for_us() -> bool:
            row = self.observer.execute(blocked, (holder,)).fetchone()
            return bool(row and row["n"])

        poll("the run to wait for the locked batch", waits_for_us, timeout)

    def release(self) -> None:
        self.holder.close()  # ends the transaction: the lock goes with it
        self.observer.close()
