"""The runs in flight when `ingest ui` stops end CANCELED, not FAILURE.

Stopping `ingest ui` interrupts every process of its `dg dev` (SIGINT to the group), run
workers included. An interrupted run worker reports its run CANCELED when the run is
CANCELING by then, and FAILURE otherwise ("No user initiated termination request was
found", with the interrupt's traceback); a worker still loading its code sees CANCELING and
does not start the run at all. So, before the interrupt, the runs this `dg dev` launched
and that are still going are marked CANCELING, as the UI's Terminate button marks them;
once the group is gone, those still CANCELING (interrupted before they could report it, or
killed by the escalation) are marked CANCELED. Queued runs are left queued: the next
`ingest ui` launches them.

A run is this `dg dev`'s when the code server it was launched on (Dagster's hidden grpc_info
tag, set before the run worker starts) is one of the group's processes: another Dagster on
the same storage (a second `ingest ui` on the same data folder, `ingest demo`'s in-process
run) keeps its runs."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.tags import GRPC_INFO_TAG

IN_FLIGHT = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
CANCELING_MESSAGE = "ingest ui is stopping: the run is interrupted with its Dagster processes."
CANCELED_MESSAGE = "ingest ui stopped while the run was in flight."


@contextmanager
def ui_instance(home: Path) -> Iterator[dg.DagsterInstance]:
    """The instance `dg dev` uses when DAGSTER_HOME is `home` (its dagster.yaml)."""
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        yield instance


def code_server_endpoints(command_lines: Iterable[Sequence[str]]) -> set[str]:
    """The sockets and ports that code servers among these processes serve on (`dagster
    code-server start --socket …`, `dagster api grpc --port …`)."""
    endpoints = set()
    for argv in command_lines:
        for flag, value in itertools.pairwise(argv):
            if flag in ("--socket", "--port"):
                endpoints.add(value)
    return endpoints


def launched_on(run: dg.DagsterRun, endpoints: set[str]) -> bool:
    try:
        info = json.loads(run.tags.get(GRPC_INFO_TAG, "{}"))
    except ValueError:
        return False
    return any(str(info.get(key)) in endpoints for key in ("socket", "port") if info.get(key) is not None)


def cancel_in_flight(instance: dg.DagsterInstance, command_lines: Iterable[Sequence[str]]) -> list[str]:
    """Mark CANCELING the runs in flight that the code servers among these processes launched;
    their ids."""
    endpoints = code_server_endpoints(command_lines)
    runs = [run for run in instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT)) if launched_on(run, endpoints)]
    for run in runs:
        instance.report_run_canceling(run, message=CANCELING_MESSAGE)
    return [run.run_id for run in runs]


def finish_canceled(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> dict[str, str]:
    """After the processes are gone: mark CANCELED those of the runs still CANCELING (no worker
    is left to do it); each run's status, by id."""
    statuses = {}
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        if run is None:
            continue
        if run.status == dg.DagsterRunStatus.CANCELING:
            instance.report_run_canceled(run, message=CANCELED_MESSAGE)
            run = instance.get_run_by_id(run_id) or run
        statuses[run_id] = run.status.value
    return statuses
