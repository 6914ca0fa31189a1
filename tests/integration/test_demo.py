"""`ingest demo` (what `make demo` runs), run twice as a user would: the second run finds
every sample indexed, writes no empty batch and starts no Dagster run (issue 48)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]  # the demo runs in the checkout (dagster.yaml)
INGEST = Path(sys.executable).parent / "ingest"


def demo(samples: Path, db_url: str, dagster_url: str, data_dir: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")}
    env.update(
        DATABASE_URL=db_url,
        DAGSTER_PG_URL=dagster_url,
        INGEST_DATA_DIR=str(data_dir),
        INGEST_EMBEDDER="hash",  # no model to load
        INGEST_PARSE_PROCESSES="1",
    )
    done = subprocess.run(
        [str(INGEST), "demo", "--samples", str(samples)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_rerun_with_nothing_new_writes_no_batch_and_runs_nothing(tmp_path, db_url, empty_db_url):
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "leases.md").write_text("# Leases\n\nA worker holds a lease on its job and renews it by heartbeat.")
    (samples / "otters.txt").write_text("River otters hunt fish along the banks of streams.")
    first = demo(samples, db_url, empty_db_url, tmp_path / "data")
    assert "enqueued 2 file(s) into batch" in first and "materialized document_index" in first

    again = demo(samples, db_url, empty_db_url, tmp_path / "data")
    assert "2 file(s) unchanged (already indexed): no batch was written and no run is needed" in again
    assert "Dagster run" not in again and "enqueued" not in again
    assert "Leases" in again  # the search still shows the index
    with psycopg.connect(db_url) as conn:
        assert conn.execute("select name from import_batches").fetchall() == [("demo samples",)]
    with psycopg.connect(empty_db_url) as conn:
        assert conn.execute("select count(*) from runs").fetchone() == (1,)
