"""`ingest ui` really starts Dagster (webserver + daemon) on the embedded server, and the UI
lists the job, both sensors and the schedule. Everything started is stopped."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ingestion_pipeline.db import embedded

ROOT = Path(__file__).resolve().parents[2]
QUERY = """{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError {
  __typename ... on RepositoryLocation { repositories { name jobs { name } sensors { name } schedules { name } } }
  ... on PythonError { message } } } } } }"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(port: int) -> dict | None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": QUERY}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())
    except OSError:
        return None


def loaded_repositories(answer: dict | None) -> list[dict]:
    entries = ((answer or {}).get("data") or {}).get("workspaceOrError", {}).get("locationEntries") or []
    location = entries[0].get("locationOrLoadError") if entries else None
    if location and location["__typename"] == "PythonError":
        raise AssertionError(f"code location failed to load: {location['message']}")
    return (location or {}).get("repositories") or []


def test_ingest_ui_lists_jobs_sensors_and_schedule(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("INGEST_", "DAGSTER_")) and k != "DATABASE_URL"}
    env["INGEST_DATA_DIR"] = str(tmp_path / "data")
    log = (tmp_path / "ui.log").open("w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "ingest"), "ui", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        repositories = []
        while not repositories:
            assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Dagster UI did not come up: " + (tmp_path / "ui.log").read_text()[-3000:]
            repositories = loaded_repositories(graphql(port))
            time.sleep(0.5)
        [repository] = repositories
        assert "ingest_documents" in {job["name"] for job in repository["jobs"]}
        assert {s["name"] for s in repository["sensors"]} == {"import_batch_sensor", "batch_status_sensor"}
        assert [s["name"] for s in repository["schedules"]] == ["janitor_schedule"]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        embedded.stop(tmp_path / "data")
    assert (tmp_path / "data" / "dagster" / "dagster.yaml").exists()
