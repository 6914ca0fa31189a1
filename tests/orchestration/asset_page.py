"""What the Dagster UI shows of `document_index`, read over GraphQL from a LiveDagster: the
latest materialization's metadata, each check's execution for it, the drain runs and their
tags; a sensor stopped and started again; where screenshots are kept."""

from __future__ import annotations

from pathlib import Path

from tests.orchestration.live_dagster import ROOT, LiveDagster

# Screenshots of the UI tests, kept after the run (git-ignored; docs/testing.md).
ARTIFACTS = ROOT / "test-artifacts"
INDEX = {"path": ["document_index"]}
FAILED_DOCUMENTS_TAG = "ingestion/failed_documents"

LATEST = """query ($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  assetMaterializations(limit: 1) { runId description metadataEntries { label
    ... on IntMetadataEntry { intValue } ... on TextMetadataEntry { text } } }
  assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization {
    status runId evaluation { success severity description } } } } } } } }"""
DRAIN_RUNS = """{ runsOrError(filter: {pipelineName: "ingest_documents"}) { ... on Runs { results {
  runId status tags { key value } } } } }"""
SENSOR = """query ($name: String!) { sensorOrError(sensorSelector: {repositoryLocationName: "ingestion_pipeline",
  repositoryName: "__repository__", sensorName: $name}) { ... on Sensor { sensorState { id status } } } }"""
STOP_SENSOR = """mutation ($id: String!) { stopSensor(id: $id) { __typename
  ... on StopSensorMutationResult { instigationState { status } } } }"""
START_SENSOR = """mutation ($name: String!) { startSensor(sensorSelector: {repositoryLocationName:
  "ingestion_pipeline", repositoryName: "__repository__", sensorName: $name}) { __typename
  ... on Sensor { sensorState { status } } } }"""


def screenshot_path(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def latest_materialization(live: LiveDagster) -> dict | None:
    """The latest materialization: its run id ("" when a sensor reported it), description
    and metadata as {label: value}."""
    node = live.graphql(LATEST, {"key": INDEX})["assetNodeOrError"]
    if not node["assetMaterializations"]:
        return None
    [event] = node["assetMaterializations"]
    metadata = {e["label"]: e.get("intValue", e.get("text")) for e in event["metadataEntries"]}
    return {"runId": event["runId"], "description": event["description"], "metadata": metadata}


def check_executions(live: LiveDagster) -> dict[str, dict | None]:
    """Each check's execution for the latest materialization (None: "Not evaluated")."""
    node = live.graphql(LATEST, {"key": INDEX})["assetNodeOrError"]
    return {c["name"]: c["executionForLatestMaterialization"] for c in node["assetChecksOrError"]["checks"]}


def drain_runs(live: LiveDagster) -> list[dict]:
    """Every ingest_documents run, newest first, its tags as a dict."""
    runs = live.graphql(DRAIN_RUNS)["runsOrError"]["results"]
    return [{**run, "tags": {t["key"]: t["value"] for t in run["tags"]}} for run in runs]


def drain_runs_ended(live: LiveDagster) -> list[dict] | None:
    runs = drain_runs(live)
    return runs if runs and all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs) else None


def stop_sensor(live: LiveDagster, name: str) -> None:
    state = live.graphql(SENSOR, {"name": name})["sensorOrError"]["sensorState"]
    stopped = live.graphql(STOP_SENSOR, {"id": state["id"]})["stopSensor"]
    assert stopped["instigationState"]["status"] == "STOPPED", stopped


def start_sensor(live: LiveDagster, name: str) -> None:
    started = live.graphql(START_SENSOR, {"name": name})["startSensor"]
    assert started["sensorState"]["status"] == "RUNNING", started
