"""The daemon path end to end: `ingest ui` (webserver + daemon) against a scratch embedded
server; a folder is enqueued and nothing but Dagster works on it. The sensor must request
the drain runs, the runs must materialize `document_index`, a check run must report over
GraphQL, and SIGTERM to `ingest ui` must stop it (its escalation bounds the stop), leaving
no process and no open port behind.

Tests in this module share one running instance and run in file order."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import psutil
import pytest

from ingestion_pipeline.cli.process_group import STOP_SECONDS
from ingestion_pipeline.db import embedded
from ingestion_pipeline.health import DESCRIPTIONS, WARNINGS
from tests.browser import DAGSTER_DISMISSED_POPUPS, Browser
from tests.fixtures.pdf import make_pdf
from tests.orchestration.asset_page import (
    FAILED_DOCUMENTS_TAG,
    check_executions,
    drain_runs_ended,
    latest_materialization,
    screenshot_path,
    start_sensor,
    stop_sensor,
)
from tests.orchestration.live_dagster import BIN, ROOT, LiveDagster, clean_env, gone, port_open

MATERIALIZATIONS = """query ($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  assetMaterializations(limit: 20) { runId metadataEntries { label ... on IntMetadataEntry { intValue } } }
  assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization {
    status runId evaluation { success severity description } } } } } } } }"""
RUNS = """query ($job: String!) { runsOrError(filter: {pipelineName: $job}) { ... on Runs { results {
  runId status tags { key value } } } } }"""
LAUNCH = """mutation ($job: String!) { launchRun(executionParams: {selector: {repositoryLocationName:
  "ingestion_pipeline", repositoryName: "__repository__", jobName: $job}}) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
RUN_MESSAGES = """query ($runId: ID!) { runOrError(runId: $runId) { ... on Run { eventConnection {
  events { __typename ... on MessageEvent { message } } } } } }"""
INDEX = {"path": ["document_index"]}
CHECKS = tuple(DESCRIPTIONS)  # the asset's every check, the warning no_failed_documents among them
ERRORS = tuple(name for name in CHECKS if name not in WARNINGS)  # those that pass however documents fare


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    folder = tmp_path_factory.mktemp("daemon")
    data = folder / "data"
    # The import sensor with its default interval; the batch, source and index sensors' shortened.
    env = clean_env(
        data,
        INGEST_BATCH_SENSOR_INTERVAL_SECONDS="2",
        INGEST_SOURCE_SENSOR_INTERVAL_SECONDS="2",
        INGEST_INDEX_SENSOR_INTERVAL_SECONDS="2",
    )
    server = LiveDagster.start([str(BIN / "ingest"), "ui"], env=env, log_path=folder / "ui.log")
    server.env, server.folder = env, folder
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.kill_everything()
        embedded.stop(data)


def ingest(live, *args: str) -> dict:
    done = subprocess.run(
        [str(BIN / "ingest"), *args, "--json"], cwd=ROOT, env=live.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_the_sensor_drains_an_enqueued_folder_and_the_asset_records_it(live):
    batch_id = ingest(live, "enqueue", str(ROOT / "samples"))["batch_id"]

    def finished():
        [batch] = ingest(live, "status", "--batch", batch_id)["batches"]
        return batch if batch["status"] in ("completed", "completed_with_errors", "failed") else None

    batch = live.wait_for("the batch to complete through sensor-requested runs", finished, timeout=240)
    assert (batch["status"], batch["completed"]) == ("completed", 4)

    def finished_runs():
        runs = live.graphql(RUNS, {"job": "ingest_documents"})["runsOrError"]["results"]
        done = runs and all(run["status"] in ("SUCCESS", "FAILURE", "CANCELED") for run in runs)
        return runs if done else None

    runs = live.wait_for("the drain runs to end", finished_runs, timeout=120)
    assert all(run["status"] == "SUCCESS" for run in runs), [(r["runId"][:8], r["status"]) for r in runs]
    assert all({"key": "dagster/sensor_name", "value": "import_batch_sensor"} in run["tags"] for run in runs)
    assert all({"key": "dagster/max_runtime", "value": "600"} in run["tags"] for run in runs)
    # what the run's page shows: the drain's budgets and its summary in the run's log
    messages = [
        event.get("message") or ""
        for event in live.graphql(RUN_MESSAGES, {"runId": runs[0]["runId"]})["runOrError"]["eventConnection"]["events"]
    ]
    assert any(m.startswith("draining: at most 10000 job(s)") for m in messages), messages
    assert any(m.startswith("indexed ") and "claimed job(s)" in m for m in messages), messages

    node = live.graphql(MATERIALIZATIONS, {"key": INDEX})["assetNodeOrError"]
    indexed = sum(
        entry.get("intValue") or 0
        for m in node["assetMaterializations"]
        for entry in m["metadataEntries"]
        if entry["label"] == "run_indexed"
    )
    assert {m["runId"] for m in node["assetMaterializations"]} <= {run["runId"] for run in runs}
    assert indexed == 4
    # the latest materialization shows the index's totals, as `ingest status` reads them
    index = ingest(live, "status")["index"]
    assert index["documents_by_status"] == {"indexed": 4} and index["failed_jobs"] == 0
    shown = latest_materialization(live)["metadata"]
    assert (shown["documents"], shown["documents_indexed"], shown["chunks"]) == (4, 4, index["chunks"])
    # the runs' step logs are kept with the pipeline's data, not in a temporary DAGSTER_HOME
    assert any((live.folder / "data" / "dagster" / "compute_logs").rglob("*.err"))


def test_after_a_drain_run_its_checks_show_evaluated_on_the_asset_page(live, chromium):
    """The drain runs ran the checks: each shows its result for the latest materialization
    (not "Not evaluated" until the janitor's next tick)."""
    run_ids = {run["runId"] for run in live.wait_for("the drain runs to end", lambda: drain_runs_ended(live))}
    executions = check_executions(live)
    # the janitor's schedule (every 10 minutes) reports the health checks too, for the same
    # materialization: a tick between the drain and this read is as good as the drain's own
    run_ids |= {run["runId"] for run in live.graphql(RUNS, {"job": "janitor"})["runsOrError"]["results"]}
    assert set(executions) == set(CHECKS)
    unexpected = {
        name: e for name, e in executions.items() if not (e and e["runId"] in run_ids and e["status"] == "SUCCEEDED")
    }
    assert not unexpected, (unexpected, run_ids)

    with Browser() as browser:
        url = f"http://127.0.0.1:{live.port}/assets/document_index?view=checks"
        browser.open(url, local_storage=DAGSTER_DISMISSED_POPUPS)
        # each check in the list with its status for the latest materialization
        listed = [f"{name}\nSucceeded" for name in CHECKS]
        text = browser.wait_for_text(*listed, "Passed", timeout=90)
        browser.screenshot(screenshot_path("checks-after-a-drain-run.png"))
    assert "Not evaluated" not in text


def test_a_drain_run_in_which_a_document_failed_is_marked(live, chromium):
    """A corrupt PDF (the fixture's PDF cut short) fails its document, not the run: the run is
    green, tagged ingestion/failed_documents=1 (the runs list filters on it), and the WARN
    check no_failed_documents, which the run ran, failed for the materialization it recorded."""
    folder = live.folder / "with-a-corrupt-pdf"
    folder.mkdir()
    (folder / "heron.txt").write_text("A grey heron stands in the shallows.\n")
    (folder / "corrupt.pdf").write_bytes(make_pdf(["A page about egrets."])[:150])
    batch_id = ingest(live, "enqueue", str(folder))["batch_id"]

    def finished():
        [batch] = ingest(live, "status", "--batch", batch_id)["batches"]
        return batch if batch["status"] in ("completed", "completed_with_errors", "failed") else None

    batch = live.wait_for("the batch to be drained", finished, timeout=240)
    assert (batch["status"], batch["completed"], batch["failed"]) == ("completed_with_errors", 1, 1)
    runs = live.wait_for("the drain runs to end", lambda: drain_runs_ended(live))
    [marked] = [run for run in runs if FAILED_DOCUMENTS_TAG in run["tags"]]
    assert (marked["status"], marked["tags"][FAILED_DOCUMENTS_TAG]) == ("SUCCESS", "1")
    warned = live.wait_for(
        "the warning for the run that recorded the latest materialization",
        lambda: (lambda e: e if e and e["success"] is False else None)(
            (check_executions(live)["no_failed_documents"] or {}).get("evaluation")
        ),
    )
    assert (warned["success"], warned["severity"]) == (False, "WARN")
    assert warned["description"].startswith("1 document(s) failed to index: `ingest status` lists them")

    base = f"http://127.0.0.1:{live.port}"
    with Browser() as browser:
        # the runs list, filtered on the tag as a user filters it
        browser.open(f"{base}/runs?q%5B0%5D=tag%3A{FAILED_DOCUMENTS_TAG}%3D1", local_storage=DAGSTER_DISMISSED_POPUPS)
        text = browser.wait_for_text(marked["runId"][:8], f"{FAILED_DOCUMENTS_TAG}: 1", timeout=90)
        browser.screenshot(screenshot_path("runs-marked-with-a-failed-document.png"))
        assert sum(run["runId"][:8] in text for run in runs) == 1  # the unmarked runs are filtered out

        browser.open(f"{base}/assets/document_index?view=checks&checkDetail=no_failed_documents")
        # the check list's status comes from its own query, after the detail panel's: wait for both
        browser.wait_for_text(
            "1 document(s) failed to index", "failed_documents", "no_failed_documents\nFailed", timeout=90
        )
        browser.screenshot(screenshot_path("failed-documents-check.png"))


def test_a_check_run_reports_its_results_over_graphql(live):
    """Whatever ran before it (or nothing: run alone), the index has a failed document of its
    own making when the check run starts, and the run's warning counts the index's failed
    documents as the database does."""
    failed = drain_a_folder_with_a_corrupt_pdf(live, "checked-by-a-check-run")
    assert failed >= 1
    launched = live.graphql(LAUNCH, {"job": "check_document_index"})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]

    def checks_of_that_run():
        node = live.graphql(MATERIALIZATIONS, {"key": INDEX})["assetNodeOrError"]
        checks = node["assetChecksOrError"]["checks"]
        executions = [c["executionForLatestMaterialization"] for c in checks]
        done = all(e and e["runId"] == run_id and e["status"] in ("SUCCEEDED", "FAILED") for e in executions)
        return checks if done else None

    checks = live.wait_for("the check run's results", checks_of_that_run, timeout=180)
    results = {c["name"]: c["executionForLatestMaterialization"] for c in checks}
    assert set(results) == set(CHECKS)
    warned = results.pop("no_failed_documents")  # the corrupt PDF drained above (and any before it)
    assert (warned["evaluation"]["success"], warned["evaluation"]["severity"]) == (False, "WARN"), warned
    assert warned["evaluation"]["description"].startswith(f"{failed} document(s) failed to index"), warned
    assert all(r["status"] == "SUCCEEDED" and r["evaluation"]["success"] for r in results.values()), results
    assert results["schema_matches_migrations"]["evaluation"]["description"].startswith("no drift")


def drain_a_folder_with_a_corrupt_pdf(live, name: str) -> int:
    """Enqueue a folder of a note and a corrupt PDF, let the sensor's drain runs index it,
    and wait until the latest materialization shows that drain (no run or sensor tick is
    left to record another): the index's failed documents, as `ingest status` counts them."""
    folder = live.folder / name
    folder.mkdir()
    (folder / "bittern.txt").write_text(f"A bittern booms in the reeds of {name}.\n")
    (folder / "corrupt.pdf").write_bytes(make_pdf([f"A page about {name}."])[:150])
    batch_id = ingest(live, "enqueue", str(folder))["batch_id"]

    def finished():
        [batch] = ingest(live, "status", "--batch", batch_id)["batches"]
        return batch if batch["status"] in ("completed", "completed_with_errors", "failed") else None

    batch = live.wait_for("the batch to be drained", finished, timeout=240)
    assert (batch["status"], batch["completed"], batch["failed"]) == ("completed_with_errors", 1, 1)
    live.wait_for("the drain runs to end", lambda: drain_runs_ended(live))
    index = ingest(live, "status")["index"]

    def recorded():
        latest = latest_materialization(live)
        return latest if latest and latest["metadata"].get("jobs_finished") == index["jobs_finished"] else None

    live.wait_for("a materialization to show the drain", recorded, timeout=120, every=0.5)
    return index["documents_by_status"].get("failed", 0)


def test_a_drain_by_ingest_work_shows_its_totals_on_the_asset_page(live, chromium):
    """No Dagster run: with the import sensor stopped, `ingest work` drains a folder;
    index_totals_sensor reports the totals as a materialization and runs the checks."""
    stop_sensor(live, "import_batch_sensor")
    try:
        # A tick the daemon began before the stop can still see the first folder and launch a
        # drain run, which then records the totals itself; the second folder is past any
        # such tick, so its totals can only come from the sensor.
        index, latest = drain_by_ingest_work(live, "drained-by-ingest-work")
        if latest["runId"]:
            index, latest = drain_by_ingest_work(live, "drained-by-ingest-work-again")
        assert latest["runId"] == "" and latest["metadata"]["reported_by"] == "index_totals_sensor"
        shown = latest["metadata"]
        assert shown["documents"] == index["documents"] == sum(index["documents_by_status"].values())
        assert {status: shown[f"documents_{status}"] for status in index["documents_by_status"]} == index[
            "documents_by_status"
        ]
        assert (shown["chunks"], shown["collections"], shown["failed_jobs"]) == (
            index["chunks"],
            index["collections"],
            index["failed_jobs"],
        )
        # the checks run the sensor requested evaluate them for this materialization
        executions = live.wait_for(
            "the checks of the reported materialization",
            lambda: (lambda e: e if all(e[name] and e[name]["status"] == "SUCCEEDED" for name in ERRORS) else None)(
                check_executions(live)
            ),
        )
        assert set(executions) >= set(CHECKS)

        with Browser() as browser:
            browser.open(f"http://127.0.0.1:{live.port}/assets/document_index", local_storage=DAGSTER_DISMISSED_POPUPS)
            browser.wait_for_text("documents_indexed", "reported_by", "index_totals_sensor", timeout=90)
            browser.screenshot(screenshot_path("index-totals-after-ingest-work.png"))
            rows = {cells[0]: cells[-1] for cells in browser.table_rows()}  # key, timestamp, value
        assert rows["documents"] == str(index["documents"])
        assert rows["documents_indexed"] == str(index["documents_by_status"]["indexed"])
        assert rows["documents_failed"] == str(index["documents_by_status"].get("failed", 0))
        assert (rows["chunks"], rows["collections"]) == (str(index["chunks"]), str(index["collections"]))
    finally:
        start_sensor(live, "import_batch_sensor")


def drain_by_ingest_work(live, name: str) -> tuple[dict, dict]:
    """Enqueue a folder of three notes, drain it with `ingest work`, and wait for a
    materialization showing that drain: the index's totals and that materialization."""
    live.wait_for("no drain run to be active", lambda: drain_runs_ended(live))
    folder = live.folder / name
    folder.mkdir()
    for n, bird in enumerate(["bittern", "spoonbill", "avocet"]):
        (folder / f"{bird}.md").write_text(f"# The {bird}\n\nNote {n} on the {bird} in {name} and where it feeds.\n")
    ingest(live, "enqueue", str(folder))
    done = subprocess.run(
        [str(BIN / "ingest"), "work", "--drain"], cwd=ROOT, env=live.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    live.wait_for("no drain run to be active", lambda: drain_runs_ended(live))
    index = ingest(live, "status")["index"]

    def reported():
        latest = latest_materialization(live)
        return latest if latest and latest["metadata"].get("jobs_finished") == index["jobs_finished"] else None

    return index, live.wait_for("a materialization to show the drain", reported, timeout=120, every=0.5)


def test_the_ui_renders_the_asset_its_checks_and_both_sensors(live, chromium):
    base = f"http://127.0.0.1:{live.port}"
    with Browser() as browser:
        browser.open(f"{base}/assets/document_index?view=checks", local_storage=DAGSTER_DISMISSED_POPUPS)
        text = browser.wait_for_text("document_index", *CHECKS, timeout=90)
        browser.screenshot(live.folder / "asset-checks.png")
        assert "Join the Dagster community" not in text

        browser.open(f"{base}/automation")
        browser.wait_for_text(
            "import_batch_sensor",
            "batch_status_sensor",
            "index_totals_sensor",
            "failed_drain_run_sensor",
            "janitor_schedule",
            timeout=90,
        )
        browser.screenshot(live.folder / "automation.png")
    assert (live.folder / "asset-checks.png").stat().st_size > 10_000


SOURCE_MATERIALIZATIONS = """query ($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  assetMaterializations(limit: 5) { partition metadataEntries { label ... on IntMetadataEntry { intValue } } } } } }"""


def test_a_registered_source_syncs_on_its_schedule_and_the_ui_shows_its_counts(live, chromium):
    share = live.folder / "share"
    share.mkdir()
    (share / "heron.txt").write_text("A grey heron stands in the shallows.\n")
    (share / "egret.txt").write_text("A little egret walks the mudflat.\n")
    ingest(live, "source", "add", "share", str(share), "--collection", "birds", "--every", "60")

    def synced():
        [source] = ingest(live, "source", "list")
        return source if source["last_status"] else None

    source = live.wait_for("the sensor to sync the registered source", synced, timeout=180)
    assert (source["last_status"], source["last_counts"]["new"]) == ("succeeded", 2), source
    answer = live.graphql(SOURCE_MATERIALIZATIONS, {"key": {"path": ["source_sync"]}})
    [materialization] = answer["assetNodeOrError"]["assetMaterializations"]
    counts = {entry["label"]: entry.get("intValue") for entry in materialization["metadataEntries"]}
    assert materialization["partition"] == "share" and counts["new"] == 2 and counts["deleted"] == 0

    base = f"http://127.0.0.1:{live.port}"
    with Browser() as browser:
        browser.open(f"{base}/assets/source_sync?view=events", local_storage=DAGSTER_DISMISSED_POPUPS)
        browser.wait_for_text("source_sync", "share", "unchanged", "deleted", timeout=90)
        browser.screenshot(live.folder / "source-sync.png")
    assert (live.folder / "source-sync.png").stat().st_size > 10_000


def test_sigterm_to_a_busy_ingest_ui_stops_it_leaving_no_process_and_no_open_port(live):
    """The stop is bounded by its escalation (SIGINT, SIGTERM, then SIGKILL to the group once
    the grace is over: process_group.STOP_SECONDS), not by how fast Dagster tears down; so
    the exit status may be any of the three, and what is asserted is that everything ended."""
    # Busy: the sensors tick every 2 s and the source sync above may still be launching runs.
    family = psutil.Process(live.proc.pid).children(recursive=True)
    assert len(family) >= 3  # dagster dev, its webserver and daemon, code servers
    started = time.monotonic()
    live.proc.send_signal(signal.SIGTERM)  # the pid only, as `kill` and service managers do
    # A hang would outlast the escalation by far: three times its bound is a deadline, not a measure.
    code = live.proc.wait(timeout=3 * STOP_SECONDS)
    print(f"ingest ui stopped in {time.monotonic() - started:.1f} s with status {code}")

    # 0: `dg dev` stopped by itself within its grace; 143: it was still in its teardown and was
    # terminated; 137: on loaded cores its teardown outlasted the grace and the group was killed.
    assert code in (0, 128 + signal.SIGTERM, 128 + signal.SIGKILL), (code, live.log_path.read_text()[-3000:])
    assert gone(family) == []
    assert not port_open(live.port)
