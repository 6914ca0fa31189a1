"""`ingest delete`, `ingest cancel`, `ingest retry` end to end on a real database: enqueue the
samples, drain them with the worker, then act as an operator and check the outputs, the exit
codes and the rows."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.worker import Worker
from tests.helpers import batch, document, job, seed_job, write_artifacts

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nope"


@pytest.fixture
def folder(tmp_path) -> Path:
    """The samples (4 files that index), plus an empty file that fails for good."""
    target = tmp_path / "docs"
    shutil.copytree(SAMPLES, target)
    (target / "empty.txt").write_bytes(b"")
    return target


@pytest.fixture
def enqueued(pool, settings, folder):
    return enqueue_paths(pool, [folder], max_bytes=settings.max_file_bytes, batch_name="samples")


@pytest.fixture
def drained(pool, settings, enqueued):
    report = Worker(pool, settings).run(drain=True)
    assert (report.counts["completed"], report.counts["failed"]) == (4, 1)
    return enqueued


def run(capsys, db_url: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys, db_url: str, *args: str):
    code, out, _ = run(capsys, db_url, *args, "--json")
    return code, json.loads(out)


def document_id(report, name: str):
    [entry] = [f for f in report.files if Path(f.path).name == name]
    return entry.document_id


def rows_of(conn, table: str, document_id) -> int:
    return conn.execute(f"select count(*) as n from {table} where document_id = %s", (document_id,)).fetchone()["n"]


def search_sources(capsys, db_url: str, text: str) -> set[str]:
    code, hits = run_json(capsys, db_url, "search", text)
    assert code == 0
    return {hit["source_name"] for hit in hits}


def failed_job_id(conn, document_id):
    return conn.execute(
        "select id from ingestion_jobs where document_id = %s and status = 'failed'", (document_id,)
    ).fetchone()["id"]


# -- delete ---------------------------------------------------------------------------------


def test_delete_by_id_takes_the_document_out_of_search_and_purges_it(db_url, conn, drained, capsys):
    leases = document_id(drained, "postgres-leases.md")
    assert "postgres-leases.md" in search_sources(capsys, db_url, "lease fencing")
    before = batch(conn, drained.batch_id)

    code, out, err = run(capsys, db_url, "delete", str(leases))

    assert code == 0, err
    assert "deleted" in out and "postgres-leases.md" in out and "purged" in out
    assert "1 deleted, 0 refused" in out
    deleted = document(conn, leases)
    assert (deleted["status"], deleted["index_generation_id"]) == ("deleted", None)
    assert deleted["deleted_at"] is not None
    assert "postgres-leases.md" not in search_sources(capsys, db_url, "lease fencing")
    for table in ("document_pages", "document_sections", "document_chunks", "index_generations", "document_sources"):
        assert rows_of(conn, table, leases) == 0, table
    # its completed job stays counted as completed; the batch is unchanged
    after = batch(conn, drained.batch_id)
    assert (after["status"], after["completed_files"], after["failed_files"]) == (
        before["status"],
        before["completed_files"],
        before["failed_files"],
    )

    again, out, _ = run(capsys, db_url, "delete", str(leases))
    assert again == 1
    assert "already deleted" in out and "0 deleted, 1 refused" in out


def test_delete_by_source_names_with_json(db_url, conn, drained, capsys):
    code, results = run_json(
        capsys, db_url, "delete", "--source", "tea-notes.txt", "river-otters.html", "no-such-file.txt"
    )

    assert code == 0
    by_name = {r["source_name"]: r for r in results}
    assert set(by_name) == {"tea-notes.txt", "river-otters.html", "no-such-file.txt"}
    assert by_name["tea-notes.txt"]["ok"] and by_name["river-otters.html"]["ok"]
    assert by_name["tea-notes.txt"]["purged"] is True and by_name["tea-notes.txt"]["in_flight"] is False
    assert by_name["no-such-file.txt"] == {
        "ok": False,
        "reason": "source_not_found",
        "source_name": "no-such-file.txt",
        "document_id": None,
    }
    for name in ("tea-notes.txt", "river-otters.html"):
        assert document(conn, document_id(drained, name))["status"] == "deleted"
    assert document(conn, document_id(drained, "postgres-leases.md"))["status"] == "indexed"

    # a name resolves to live documents only: deleted ones are not matched again
    code, out, _ = run(capsys, db_url, "delete", "--source", "tea-notes.txt")
    assert code == 1 and "no live document has this name" in out


def test_delete_with_nothing_matched_exits_1(db_url, drained, capsys):
    unknown = uuid.uuid4()
    code, out, err = run(capsys, db_url, "delete", str(unknown))
    assert code == 1 and not err
    assert str(unknown) in out and "no such document" in out

    code, results = run_json(capsys, db_url, "delete", str(unknown))
    assert code == 1
    assert [(r["ok"], r["reason"]) for r in results] == [(False, "not_found")]


def test_delete_while_a_worker_builds_it_refuses_the_worker_and_the_janitor_removes_the_rows(db_url, conn, capsys):
    rpc = IngestionRpc(conn)
    doc, job_id = seed_job(conn)
    [claimed] = rpc.claim("worker-1")
    generation = rpc.begin_generation(claimed.job_id, doc, "worker-1", lease_token=claimed.lease_token)
    write_artifacts(conn, doc, generation.generation_id)

    code, results = run_json(capsys, db_url, "delete", str(doc))

    assert code == 0
    [result] = results
    assert (result["ok"], result["cancelled_job_id"], result["in_flight"], result["purged"]) == (
        True,
        str(job_id),
        True,
        False,
    )
    assert (job(conn, job_id)["status"], job(conn, job_id)["error_message"]) == ("cancelled", "document deleted")
    # the worker that was building it is refused from then on
    assert rpc.heartbeat(job_id, "worker-1", lease_token=claimed.lease_token).lease_lost
    done = rpc.commit_and_complete(
        job_id, doc, generation.generation_id, worker_id="worker-1", lease_token=claimed.lease_token
    )
    assert done.lease_lost
    assert rows_of(conn, "document_chunks", doc) == 3  # left to the guarded cleanup

    code, _, _ = run(capsys, db_url, "janitor")
    assert code == 0
    for table in ("document_pages", "document_sections", "document_chunks", "index_generations", "document_sources"):
        assert rows_of(conn, table, doc) == 0, table


def test_delete_table_says_a_worker_was_on_it(db_url, conn, capsys):
    rpc = IngestionRpc(conn)
    doc, _ = seed_job(conn)
    rpc.claim("worker-1")
    code, out, _ = run(capsys, db_url, "delete", str(doc))
    assert code == 0
    assert "a worker was building it" in out and "cancelled" in out


# -- cancel ---------------------------------------------------------------------------------


def test_cancel_a_batch_half_done(db_url, conn, pool, settings, enqueued, capsys):
    Worker(pool, settings).run(drain=True, max_jobs=2)
    settled = {
        f.document_id: document(conn, f.document_id)["status"]
        for f in enqueued.files
        if document(conn, f.document_id)["status"] in ("indexed", "failed")
    }
    assert len(settled) == 2

    code, out, err = run(capsys, db_url, "cancel", str(enqueued.batch_id))

    assert code == 0, err
    assert "cancelled 3 job(s)" in out and "documents already indexed stay indexed" in out
    row = batch(conn, enqueued.batch_id)
    assert (row["status"], row["cancelled_files"], row["completed_files"] + row["failed_files"], row["open_files"]) == (
        "cancelled",
        3,
        2,
        0,
    )
    assert row["cancelled_at"] is not None
    for entry in enqueued.files:  # documents already indexed (or failed) keep their state
        assert document(conn, entry.document_id)["status"] == settled.get(entry.document_id, "cancelled")
    jobs = conn.execute(
        "select status, stage, error_message from ingestion_jobs where batch_id = %s and status = 'cancelled'",
        (enqueued.batch_id,),
    ).fetchall()
    assert [(j["stage"], j["error_message"]) for j in jobs] == [("cancelled", "import batch cancelled")] * 3
    assert Worker(pool, settings).run(drain=True).as_dict()["claimed"] == 0

    # `ingest status` shows the cancelled jobs
    code, out, _ = run(capsys, db_url, "status", "--batch", str(enqueued.batch_id))
    assert code == 0
    header, _, line = out.splitlines()[:3]
    assert "cancelled" in header.split()
    columns = dict(zip(header.split()[:-2], line.split(), strict=True))  # "oldest pending" is two words and empty here
    assert (columns["status"], columns["cancelled"]) == ("cancelled", "3")
    assert int(columns["completed"]) + int(columns["failed"]) == 2
    code, report = run_json(capsys, db_url, "status", "--batch", str(enqueued.batch_id))
    [shown] = report["batches"]
    assert (shown["cancelled_files"], shown["cancelled"]) == (3, 3)

    again, out, _ = run(capsys, db_url, "cancel", str(enqueued.batch_id))
    assert again == 0  # nothing open: the batch is marked cancelled (it already was)
    assert "no job of it was open: the batch is marked cancelled all the same, so it takes no new files" in out

    # cancelled jobs are routine for `ingest health`: every check passes, the count is shown
    code, out, _ = run(capsys, db_url, "health")
    assert code == 0, out
    assert "cancelled 3" in out.splitlines()[0]


def test_cancel_json_and_unknown_batch(db_url, conn, enqueued, capsys):
    code, result = run_json(capsys, db_url, "cancel", str(enqueued.batch_id))
    assert code == 0
    assert (result["ok"], result["cancelled"], result["in_flight"], len(result["job_ids"])) == (True, 5, 0, 5)
    assert result["batch"]["status"] == "cancelled" and result["batch"]["cancelled"] == 5

    unknown = uuid.uuid4()
    code, out, err = run(capsys, db_url, "cancel", str(unknown))
    assert code == 1 and not err
    assert "no such batch" in out
    code, result = run_json(capsys, db_url, "cancel", str(unknown))
    assert code == 1 and result["reason"] == "batch_not_found"


# -- retry ----------------------------------------------------------------------------------


def test_retry_failed_jobs_in_each_form(db_url, conn, pool, settings, drained, capsys):
    empty = document_id(drained, "empty.txt")
    failed = failed_job_id(conn, empty)

    code, out, err = run(capsys, db_url, "retry", "--failed")
    assert code == 0, err
    assert str(failed) in out and "retried" in out and "1 retried, 0 refused" in out
    assert (job(conn, failed)["status"], job(conn, failed)["attempt_count"]) == ("pending", 0)
    assert batch(conn, drained.batch_id)["status"] == "processing"

    code, out, _ = run(capsys, db_url, "retry", "--failed")
    assert code == 1 and "nothing to retry: no failed job" in out

    Worker(pool, settings).run(drain=True)  # it fails again
    code, result = run_json(capsys, db_url, "retry", "--batch", str(drained.batch_id))
    assert code == 0
    assert (result["retried"], result["job_ids"], result["refused"]) == (1, [str(failed)], [])

    Worker(pool, settings).run(drain=True)
    code, out, _ = run(capsys, db_url, "retry", "--batch", str(uuid.uuid4()))
    assert code == 1 and "nothing to retry: no failed job in batch" in out
    code, out, _ = run(capsys, db_url, "retry", str(failed))
    assert code == 0 and "1 retried" in out


def test_retry_refusals_are_in_words(db_url, conn, pool, settings, drained, capsys):
    completed = conn.execute(
        "select id from ingestion_jobs where document_id = %s", (document_id(drained, "tea-notes.txt"),)
    ).fetchone()["id"]
    unknown = uuid.uuid4()

    code, out, _ = run(capsys, db_url, "retry", str(completed), str(unknown))

    assert code == 1
    assert "completed jobs are not retried" in out and "no such job" in out
    assert "0 retried, 2 refused" in out
    code, result = run_json(capsys, db_url, "retry", str(completed))
    assert code == 1 and result["refused"] == [{"job_id": str(completed), "reason": "completed"}]

    # a failed job of a deleted document: refused by id, never selected by --failed
    empty = document_id(drained, "empty.txt")
    failed = failed_job_id(conn, empty)
    assert run(capsys, db_url, "delete", str(empty))[0] == 0
    code, out, _ = run(capsys, db_url, "retry", str(failed))
    assert code == 1 and "its document was deleted" in out
    code, out, _ = run(capsys, db_url, "retry", "--failed")
    assert code == 1 and "nothing to retry" in out


def test_retry_refuses_cancelled_and_open_jobs(db_url, conn, enqueued, capsys):
    rpc = IngestionRpc(conn)
    [claimed] = rpc.claim("worker-1")
    open_job = conn.execute(
        "select id from ingestion_jobs where batch_id = %s and status = 'pending' limit 1", (enqueued.batch_id,)
    ).fetchone()["id"]
    code, out, _ = run(capsys, db_url, "retry", str(claimed.job_id), str(open_job))
    assert code == 1
    assert "has a live lease (a worker is on it)" in out and "already queued" in out

    assert run(capsys, db_url, "cancel", str(enqueued.batch_id))[0] == 0
    code, out, _ = run(capsys, db_url, "retry", str(open_job))
    assert code == 1 and "cancelled jobs are not retried" in out


# -- usage ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        ["delete"],
        ["cancel", "xyz"],
        ["retry"],
        ["retry", str(uuid.UUID(int=1)), "--failed"],
        ["retry", "--failed", "--batch", str(uuid.UUID(int=1))],
        ["retry", "--batch", "nope"],
        ["retry", "12"],
    ],
)
def test_usage_errors_are_one_line_and_exit_2(capsys, arguments):
    code, out, err = run(capsys, UNREACHABLE, *arguments)
    assert code == 2
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ingest: error:"), err


def test_cancel_without_batch_id_is_an_argparse_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        ingest(["cancel"])
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_unreachable_database_is_one_line(capsys):
    code, _, err = run(capsys, UNREACHABLE, "delete", str(uuid.uuid4()))
    assert code == 1
    assert err.startswith("ingest: error:") and "127.0.0.1" in err and len(err.splitlines()) == 1


def test_janitor_removes_the_bytes_of_a_document_deleted_before_its_build_began(db_url, conn, capsys):
    rpc = IngestionRpc(conn)
    doc, _ = seed_job(conn)
    rpc.claim("worker-1")  # in flight, no generation begun yet
    code, [result] = run_json(capsys, db_url, "delete", str(doc))
    assert code == 0 and (result["in_flight"], result["purged"]) == (True, False)
    assert rpc.cleanup_generations(dry_run=True).sources == 1  # the database's cleanup would remove them

    assert run(capsys, db_url, "janitor")[0] == 0

    assert rows_of(conn, "document_sources", doc) == 0
