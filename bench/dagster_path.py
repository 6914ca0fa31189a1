"""The Dagster path against the bare worker: one generated corpus of HTML pages, enqueued
as one batch and drained twice, each time into a fresh database on the same server:

  ingest work --drain   one `ingest work --drain` process, started as soon as the enqueue
                        returns (its start-up is part of its time);
  sensor                `ingest ui` (webserver + daemon, as a user starts it) already up and
                        idle, with nothing set but the databases: only the import sensor's
                        runs drain the batch.

Times come from the database's clock and count from the start of the enqueue (its jobs
become claimable while it runs, so the sensor may start runs before it returns; the bare
worker starts when it returns): "enqueue" is how long enqueue_paths took, "first claim"
the earliest ingestion_jobs.started_at of the batch (set by the claim), "done" the
batch's completed_at (set by the last job's acknowledgement). "relative" is the bare
worker's "done" divided by the path's (≥ 1 is faster).

The big batch is enqueued at a random point of the daemon's 5 s sensor cycle (seeded).
Then --latency-samples batches of 5 pages are enqueued one after the other, each once the
previous one's runs have ended and again at a random point of the cycle: their
enqueue → first claim is the wait a user sees for a new batch (each needs a new run).

For the sensor path the runs are read back over GraphQL: when each was created (the
sensor's request), started (its process was up) and ended, and the metadata of the
materializations they recorded. Dagster's own storage goes into a scratch database
(DAGSTER_PG_URL), never into a `dagster` database of the server.

Server: a private embedded PostgreSQL by default, or --database-url (the role needs
CREATEDB; the scratch databases are dropped at the end).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import (
    command_line,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    print_table,
)
from dagster_ui import BIN, CpuSampler, DagsterUI
from ingest_runs import make_document

TIMINGS_SQL = """
select b.created_at, b.completed_at, b.status, b.total_files, b.completed_files, b.failed_files,
       (select min(j.started_at) from ingestion_jobs j where j.batch_id = b.id) as first_claim
  from import_batches b where b.id = %s
"""
TICKS_QUERY = """{ sensorOrError(sensorSelector: {repositoryName: "__repository__",
  repositoryLocationName: "ingestion_pipeline", sensorName: "import_batch_sensor"}) { ... on Sensor {
  sensorState { ticks(limit: 50) { status timestamp endTimestamp runIds } } } } }"""
RUNS_QUERY = """{ runsOrError(filter: {pipelineName: "ingest_documents"}, limit: 200) { ... on Runs { results {
  runId status creationTime startTime endTime
  assetMaterializations { metadataEntries { label ... on IntMetadataEntry { intValue } } } } } } }"""


@dataclass
class PathResult:
    name: str
    docs: int
    enqueue: float
    seconds: float
    first_claim: float
    runs: str = "1 process"
    cpu: str = ""

    def row(self, baseline: float) -> list:
        return [
            self.name,
            self.docs,
            f"{self.enqueue:.1f}",
            f"{self.seconds:.1f}",
            f"{self.docs / self.seconds:.1f}",
            f"{self.first_claim:.1f}",
            self.runs,
            f"{baseline / self.seconds:.2f}",
        ]


def generate_pages(folder: Path, count: int, mean_kb: float, seed: int) -> float:
    rng = random.Random(seed)
    total = 0
    for number in range(count):
        target = max(2048, int(rng.gauss(mean_kb, mean_kb / 3) * 1024))
        text = make_document("html", number, target, rng)
        (folder / f"page-{number:05d}.html").write_text(text, "utf-8")
        total += len(text.encode())
    return total / 1e6


def db_clock(uri: str) -> float:
    with connect(uri) as conn:
        return float(conn.execute("select extract(epoch from clock_timestamp()) as t").fetchone()["t"])


def enqueue(uri: str, folder: Path) -> tuple[str, float, float]:
    """Enqueue the folder as one batch: its id, the database clock when the enqueue began,
    and how long it took (its jobs become claimable while it runs)."""
    from ingestion_pipeline.db.connection import make_pool
    from ingestion_pipeline.operations.enqueue import enqueue_paths
    from ingestion_pipeline.settings import Settings

    settings = Settings(database_url=uri)
    with make_pool(uri, settings) as pool:
        began = db_clock(uri)
        report = enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes, batch_name="bench dagster path")
        took = db_clock(uri) - began
    return str(report.batch_id), began, took


def batch_timings(uri: str, batch_id: str) -> dict:
    with connect(uri) as conn:
        return conn.execute(TIMINGS_SQL, [batch_id]).fetchone()


def wait_until_done(uri: str, batch_id: str, timeout: float, alive=lambda: True) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        row = batch_timings(uri, batch_id)
        if row["completed_at"] is not None:
            return row
        if time.monotonic() > deadline or not alive():
            raise RuntimeError(f"batch {batch_id} not done: {row}")
        time.sleep(0.2)


def result(name: str, row: dict, began: float, took: float, runs: str) -> PathResult:
    if row["failed_files"]:
        raise RuntimeError(f"{name}: {row['failed_files']} document(s) failed")
    return PathResult(
        name,
        row["completed_files"],
        took,
        row["completed_at"].timestamp() - began,
        row["first_claim"].timestamp() - began,
        runs,
    )


def bare_worker(server: str, folder: Path, timeout: float) -> PathResult:
    uri = create_database(server, "bench_dagster_bare", migrate=True)
    try:
        batch_id, began, took = enqueue(uri, folder)
        env = {**os.environ, "DATABASE_URL": uri}
        with CpuSampler() as cpu:
            subprocess.run(
                [str(BIN / "ingest"), "work", "--drain", "--json"],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=timeout,
            )
        outcome = result("ingest work --drain", wait_until_done(uri, batch_id, 10), began, took, "1 process")
        outcome.cpu = cpu.summary()
        return outcome
    finally:
        drop_database(server, "bench_dagster_bare")


def sensor_path(
    server: str, folder: Path, data_dir: Path, args: argparse.Namespace
) -> tuple[PathResult, list[dict], list[float]]:
    uri = create_database(server, "bench_dagster_sensor", migrate=True)
    storage = create_database(server, "bench_dagster_storage")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INGEST_", "DAGSTER_")) and k != "DATABASE_URL"}
    env.update(DATABASE_URL=uri, DAGSTER_PG_URL=storage, INGEST_DATA_DIR=str(data_dir))
    ui = DagsterUI(env, data_dir / "ingest-ui.log")
    rng = random.Random(args.seed)
    alive = lambda: ui.proc.poll() is None  # noqa: E731
    try:
        ui.wait_ready()
        # The daemon passes over its sensors every 5 s: enqueue at a random point of that cycle.
        time.sleep(rng.uniform(0, 5))
        batch_id, began, took = enqueue(uri, folder)
        with CpuSampler() as cpu:
            row = wait_until_done(uri, batch_id, args.timeout, alive=alive)
        runs = finished_runs(ui)
        latencies = first_claim_latencies(uri, ui, folder.parent / "small", rng, args.latency_samples, alive)
        ticks = ui.graphql(TICKS_QUERY)["sensorOrError"]["sensorState"]["ticks"]
        requested_by = {run_id: tick for tick in ticks for run_id in tick["runIds"]}
        outcome = result("sensor → ingest_documents", row, began, took, f"{len(runs)} run(s)")
        outcome.cpu = cpu.summary()
        return (
            outcome,
            [{**run, "enqueue_began": began, "tick": requested_by.get(run["runId"])} for run in runs],
            latencies,
        )
    finally:
        ui.stop()
        drop_database(server, "bench_dagster_sensor")
        drop_database(server, "bench_dagster_storage")


def first_claim_latencies(
    uri: str, ui: DagsterUI, folder: Path, rng: random.Random, samples: int, alive
) -> list[float]:
    """Enqueue → first claim for small batches, each enqueued when no drain run is left and
    at a random point of the daemon's 5 s sensor cycle: each needs a new run."""
    latencies = []
    for sample in range(samples):
        finished_runs(ui)
        batch_folder = folder / str(sample)
        batch_folder.mkdir(parents=True)
        for number in range(5):
            (batch_folder / f"small-{sample}-{number}.html").write_text(
                make_document("html", 100_000 + sample * 10 + number, 4096, rng), "utf-8"
            )
        time.sleep(rng.uniform(0, 5))
        batch_id, began, _ = enqueue(uri, batch_folder)
        row = wait_until_done(uri, batch_id, 120, alive=alive)
        latencies.append(row["first_claim"].timestamp() - began)
    return latencies


def finished_runs(ui: DagsterUI, timeout: float = 60) -> list[dict]:
    """The drain runs, once each has ended (the batch completes before its last run ends)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = ui.graphql(RUNS_QUERY)["runsOrError"]["results"]
        if all(run["endTime"] for run in runs) or time.monotonic() > deadline:
            return sorted(runs, key=lambda run: run["creationTime"])
        time.sleep(0.5)


def run_rows(runs: list[dict]) -> list[list]:
    rows = []
    for run in runs:
        t0 = run["enqueue_began"]
        indexed = sum(
            entry.get("intValue") or 0
            for m in run["assetMaterializations"]
            for entry in m["metadataEntries"]
            if entry["label"] == "run_indexed"
        )

        def at(value: float | None, t0: float = t0) -> str:
            return f"{value - t0:.1f}" if value else "-"

        tick = run["tick"] or {}
        rows.append(
            [
                run["runId"][:8],
                run["status"],
                at(tick.get("timestamp")),
                at(tick.get("endTimestamp")),
                at(run["creationTime"]),
                at(run["startTime"]),
                at(run["endTime"]),
                indexed,
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1600, help="HTML pages to generate (default 1600)")
    parser.add_argument("--mean-kb", type=float, default=16.0, help="mean page size in KiB (default 16)")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL"),
        help="server to create the scratch databases on (default: a private embedded one)",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per path before giving up")
    parser.add_argument(
        "--latency-samples",
        type=int,
        default=5,
        help="small batches enqueued after the big one, to time enqueue → first claim (default 5)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-dagster-path-") as tmp:
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        mb = generate_pages(folder, args.docs, args.mean_kb, args.seed)
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        server_cm = embedded_server() if not args.database_url else contextlib.nullcontext(args.database_url)
        with server_cm as server:
            print(command_line())
            print(machine_line(server))
            print(f"corpus: {args.docs} HTML pages, {mb:.1f} MB (seed {args.seed})")
            bare = bare_worker(server, folder, args.timeout)
            sensor, runs, latencies = sensor_path(server, folder, data_dir, args)
    print_table(
        "one batch: seconds from the start of its enqueue",
        ["path", "docs", "enqueue", "done", "docs/s", "first claim", "ran as", "relative"],
        [bare.row(bare.seconds), sensor.row(bare.seconds)],
    )
    print_table(
        "CPU seconds used while each path drained",
        ["path", "by kind of process"],
        [[bare.name, bare.cpu], [sensor.name, sensor.cpu]],
    )
    print_table(
        "the sensor's drain runs (seconds from the start of the enqueue)",
        ["run", "status", "tick began", "tick ended", "requested", "started", "ended", "indexed"],
        run_rows(runs),
    )
    if latencies:
        print_table(
            f"enqueue → first claim through the sensor, {len(latencies)} batches of 5 pages, each at a "
            "random point of the daemon's 5 s sensor cycle (seconds)",
            ["min", "median", "max", "all"],
            [
                [
                    f"{min(latencies):.1f}",
                    f"{sorted(latencies)[len(latencies) // 2]:.1f}",
                    f"{max(latencies):.1f}",
                    " ".join(f"{x:.1f}" for x in latencies),
                ]
            ],
        )


if __name__ == "__main__":
    main()
