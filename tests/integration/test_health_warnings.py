"""Failed documents are a warning of `ingest health` (issue 61): the count and the command
that lists them, in the table, on a `warning:` line and in --json, while the exit status
stays 0 (a bad document fails its own job, never the index); a check that needs action
still exits 1 beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ingestion_pipeline.processing import ProcessingError
from ingestion_pipeline.worker import Worker
from tests.helpers import make_lease_stale, seed_batch, seed_job

INGEST = Path(sys.executable).parent / "ingest"
WARNED = (
    "2 document(s) failed to index: `ingest status` lists them with their errors; "
    "`ingest retry --failed` queues them again"
)


def health(db_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INGEST), "health", *args, "--database-url", db_url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def fail_two_documents(pool, settings, conn) -> list:
    batch_id = seed_batch(conn)
    documents = [seed_job(conn, batch_id)[0] for _ in range(2)]

    def unreadable(run):
        raise ProcessingError("corrupt PDF: the file is truncated or damaged")

    assert Worker(pool, settings, processor=unreadable).run(drain=True).counts["failed"] == 2
    return documents


def test_failed_documents_are_a_warning_that_does_not_fail_the_health_check(db_url, pool, settings, conn, tmp_path):
    clean = health(db_url, tmp_path)
    assert clean.returncode == 0 and "warning" not in clean.stdout.casefold(), clean.stdout
    assert "no_failed_documents        ok      no failed document" in clean.stdout

    documents = fail_two_documents(pool, settings, conn)
    warned = health(db_url, tmp_path)
    assert warned.returncode == 0, warned.stdout + warned.stderr
    lines = warned.stdout.splitlines()
    assert f"no_failed_documents        WARNING  {WARNED}" in lines
    assert lines[-1] == f"warning: {WARNED}"
    assert not any(line.startswith("needs action:") for line in lines)

    report = json.loads(health(db_url, tmp_path, "--json").stdout)
    assert (report["problems"], report["warnings"]) == ([], [WARNED])
    [check] = [c for c in report["checks"] if c["name"] == "no_failed_documents"]
    assert (check["passed"], check["warning"]) == (False, True)

    # a deleted document is no longer the index's: the count drops with it
    deleted = subprocess.run(
        [str(INGEST), "delete", str(documents[0]), "--database-url", db_url], cwd=tmp_path, capture_output=True
    )
    assert deleted.returncode == 0, deleted.stderr
    report = json.loads(health(db_url, tmp_path, "--json").stdout)
    assert report["warnings"] == [WARNED.replace("2 document(s)", "1 document(s)")]


def test_a_check_that_needs_action_still_fails_beside_the_warning(db_url, pool, settings, conn, tmp_path):
    fail_two_documents(pool, settings, conn)
    _, job_id = seed_job(conn)
    from ingestion_pipeline.db.rpc import IngestionRpc

    IngestionRpc(conn).claim("worker-1")
    make_lease_stale(conn, job_id)
    sick = health(db_url, tmp_path, "--json")
    assert sick.returncode == 1
    report = json.loads(sick.stdout)
    assert len(report["problems"]) == 1 and "lease past its deadline" in report["problems"][0]
    assert report["warnings"] == [WARNED]
