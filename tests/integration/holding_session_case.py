"""Not a test module of the suite (its name is not test_*.py): test_session_isolation.py runs
it as a pytest session of its own, several at once. Its one test takes the suite's embedded
server (the `pg_server` fixture, as every database test does), says where the server keeps
its data, and holds it until the barrier file appears."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ingestion_pipeline.db.connection import connect

# Only against a hung parent: the barrier normally appears within seconds.
GIVE_UP_SECONDS = 120


def test_hold_the_embedded_server(pg_server):
    barrier = Path(os.environ["HOLD_BARRIER"])
    with connect(pg_server.admin_url) as conn:
        data_dir = conn.execute("show data_directory").fetchone()["data_directory"]
    ready = Path(os.environ["HOLD_READY"])
    ready.with_suffix(".tmp").write_text(data_dir)
    ready.with_suffix(".tmp").rename(ready)  # whole, or not there yet

    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not barrier.exists():
        assert time.monotonic() < deadline, "the barrier never appeared"
        time.sleep(0.05)

    assert (Path(data_dir) / "PG_VERSION").is_file()
    with connect(pg_server.admin_url) as conn:
        assert conn.execute("select count(*) as n from pg_database").fetchone()["n"] >= 1
