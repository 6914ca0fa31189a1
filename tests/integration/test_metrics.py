"""`ingest metrics` (issue 49): the queue in Prometheus text format, read from the database at
each scrape, so work done by any worker shows; parsed by prometheus_client's own parser.

Nothing here waits on time: each scrape is one read of the database, the work between scrapes
is done by `ingest work --max-jobs` / `--drain` run to completion, and the one window the
metrics have (completions in the last minute) is tested by moving rows' times, not by waiting.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

from ingestion_pipeline import Index
from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.metrics.queue import queue_registry
from ingestion_pipeline.metrics.searches import SEARCH_LATENCY, serve_search_metrics
from ingestion_pipeline.settings import load_settings
from tests.helpers import make_lease_stale, seed_job

INGEST = Path(sys.executable).parent / "ingest"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of /metrics, by (sample name, sorted labels)."""
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - our own server on 127.0.0.1
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, tuple(sorted(labels.items()))]


@pytest.fixture
def exporter(db_url: str, tmp_path: Path) -> Iterator[str]:
    """`ingest metrics` on a free port (0: the command prints the one it got), probing a
    lexical search at each scrape; stopped by SIGTERM, which must exit 0."""
    env = {k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")}
    command = ["metrics", "--port", "0", "--probe-query", "keepers", "--probe-mode", "lexical"]
    process = subprocess.Popen(
        [str(INGEST), *command, "--database-url", db_url],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()  # printed once it listens; EOF if it failed to start
        assert line.startswith("serving http://127.0.0.1:"), line + process.stderr.read()
        yield line.split()[1]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "Traceback" not in err


@pytest.fixture
def work_env(monkeypatch):
    """The in-process commands: the hash embedder (no model to load), parsing in threads."""
    for name in [k for k in os.environ if k.upper() == "DATABASE_URL" or k.upper().startswith("INGEST_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")
    monkeypatch.setenv("INGEST_PARSE_PROCESSES", "0")


def run(capsys, db_url: str, *args: str) -> None:
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == 0, out + err


def test_a_drain_shows_in_the_metrics_pending_falls_completed_rises(exporter, db_url, conn, tmp_path, capsys, work_env):
    files = tmp_path / "docs"
    files.mkdir()
    for n in range(5):
        (files / f"keepers-{n}.md").write_text(f"# Keepers {n}\n\nThe lighthouse keepers of log {n}.\n")
    run(capsys, db_url, "enqueue", str(files))
    (tmp_path / "broken.pdf").write_bytes(b"this is not a PDF at all")  # enqueued last: claimed last
    run(capsys, db_url, "enqueue", str(tmp_path / "broken.pdf"))
    conn.execute("update ingestion_jobs set created_at = now() - interval '1 hour'")  # waiting an hour

    before = scrape(exporter)
    assert value(before, "ingest_database_up") == 1
    assert value(before, "ingest_jobs", status="pending") == 6
    assert value(before, "ingest_jobs", status="completed") == 0
    assert value(before, "ingest_jobs_completed_total") == 0
    assert value(before, "ingest_job_claims_total") == 0
    assert value(before, "ingest_oldest_pending_age_seconds") >= 3600
    assert value(before, "ingest_leases_stale") == 0

    run(capsys, db_url, "work", "--drain", "--max-jobs", "2", "--concurrency", "1")
    during = scrape(exporter)
    assert value(during, "ingest_jobs", status="pending") == 4 < value(before, "ingest_jobs", status="pending")
    assert value(during, "ingest_jobs_completed_total") == 2 > value(before, "ingest_jobs_completed_total")
    assert value(during, "ingest_job_claims_total") == 2
    assert value(during, "ingest_jobs_completed_last_minute") == 2

    run(capsys, db_url, "work", "--drain")
    after = scrape(exporter)
    assert value(after, "ingest_jobs", status="pending") == 0
    assert value(after, "ingest_jobs", status="processing") == 0
    assert value(after, "ingest_jobs_completed_total") == 5
    assert value(after, "ingest_jobs", status="failed") == 1
    assert value(after, "ingest_jobs_failed_total", format="PDF") == 1  # per format, as `ingest work` names it
    assert value(after, "ingest_job_claims_total") == 6
    assert value(after, "ingest_oldest_pending_age_seconds") == 0
    # Each scrape ran the probe search once, before its histogram was read.
    assert value(after, f"{SEARCH_LATENCY}_count", mode="lexical") == 3

    # The drain rate counts the last minute's completions only.
    conn.execute("update ingestion_jobs set completed_at = completed_at - interval '2 minutes'")
    later = scrape(exporter)
    assert value(later, "ingest_jobs_completed_last_minute") == 0
    assert value(later, "ingest_drain_docs_per_second") == 0
    assert value(later, "ingest_jobs_completed_total") == 5  # the total stays


def test_stale_leases_retry_waits_and_dead_letters(conn):
    """Read through the RPC client: a lease past its deadline is stale until the janitor's
    expiry dead-letters it (its final attempt), then it counts as a dead letter."""
    rpc = IngestionRpc(conn)
    seed_job(conn, max_attempts=1)
    _, waiting = seed_job(conn)
    conn.execute("update ingestion_jobs set next_run_at = now() + interval '1 hour' where id = %s", (waiting,))
    [claimed] = rpc.claim("metrics-test")
    make_lease_stale(conn, claimed.job_id)

    stale = rpc.queue_metrics()
    assert stale.by_status() == {"pending": 1, "processing": 1, "completed": 0, "failed": 0, "cancelled": 0}
    assert (stale.stale_leases, stale.retry_waiting, stale.claims, stale.dead_lettered) == (1, 1, 1, 0)

    assert rpc.expire_stale().expired == 1
    expired = rpc.queue_metrics()
    assert (expired.stale_leases, expired.dead_lettered) == (0, 1)
    assert expired.failed_by_format == {"text/plain": 1}


def test_a_process_that_searches_exports_its_own_latency_histogram(db_url, work_env):
    served = serve_search_metrics(0)
    try:
        with Index.open(db_url) as index:
            for query in ("keepers", "lighthouse", "log"):
                index.search(query, mode="lexical")
        samples = scrape(f"http://127.0.0.1:{served.port}/metrics")
    finally:
        served.stop()
    assert value(samples, f"{SEARCH_LATENCY}_count", mode="lexical") == 3
    assert value(samples, f"{SEARCH_LATENCY}_bucket", mode="lexical", le="+Inf") == 3


def test_a_scrape_while_the_database_refuses_connections_says_so_and_recovers(db_url, pg_server):
    """No failed scrape (Prometheus would lose every series): `ingest_database_up 0` and no
    queue series, then 1 again once connections are accepted."""
    settings = load_settings(database_url=db_url, connect_timeout_seconds=1)
    name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    with make_pool(db_url, settings) as pool, psycopg.connect(pg_server.admin_url, autocommit=True) as admin:
        registry, stop = queue_registry(IngestionRpc(pool))
        try:
            assert read(registry)[("ingest_database_up", ())] == 1
            admin.execute(sql.SQL("alter database {} allow_connections false").format(sql.Identifier(name)))
            try:
                admin.execute("select pg_terminate_backend(pid) from pg_stat_activity where datname = %s", (name,))
                down = read(registry)
            finally:
                admin.execute(sql.SQL("alter database {} allow_connections true").format(sql.Identifier(name)))
            assert down[("ingest_database_up", ())] == 0
            assert not any(sample_name.startswith("ingest_jobs") for sample_name, _ in down)
            # The pool reconnects in the background, with its own backoff (psycopg_pool): a later
            # scrape reads again. Each read waits for a connection up to the connect timeout
            # (1 s), so this is no sleep; 60 reads bound it where the backoff is seconds.
            assert any(read(registry)[("ingest_database_up", ())] == 1 for _ in range(60))
        finally:
            stop()


def read(registry) -> Samples:
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
