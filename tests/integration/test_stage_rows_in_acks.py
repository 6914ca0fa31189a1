"""Stage rows ride the acknowledgement (migration …_stage_rows_in_acks.sql): the items of
complete_many and fail_or_retry_many carry their job's stage-log rows, written in the
acknowledgement's transaction only when the item's token fence holds; a completion that
commits a generation adds its own `commit` row, timed by the server. The worker sends
every row that way on both schemas of the support window (this release's and the previous
one's).
"""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.db.models import CompleteItem, FailItem, StageRow
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.schema_level import SchemaLevel
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from tests.helpers import job, make_lease_stale, seed_job, snapshot, write_artifacts
from tests.old_enqueue import enqueue_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WORKER = "worker-1"


def rows(*names: str, **detail) -> tuple[StageRow, ...]:
    began = datetime.now(UTC) - timedelta(seconds=len(names))
    return tuple(
        StageRow(name, began + timedelta(seconds=n), began + timedelta(seconds=n + 0.5), {"seconds": 0.5, **detail})
        for n, name in enumerate(names)
    )


def claimed(conn, count: int = 1) -> list:
    for _ in range(count):
        seed_job(conn)
    return sorted(IngestionRpc(conn).claim(WORKER, limit=count), key=lambda c: c.job_id)


def logged(conn, job_id) -> list[dict]:
    return conn.execute(
        "select stage, worker_id, detail, started_at, finished_at from ingestion_job_stages "
        "where job_id = %s order by id",
        (job_id,),
    ).fetchall()


def test_a_completion_writes_its_stage_rows_and_the_commit_row_the_server_timed(conn):
    rpc = IngestionRpc(conn)
    built, plain = claimed(conn, 2)
    generation_id = rpc.begin_generation(
        built.job_id, built.document_id, WORKER, lease_token=built.lease_token
    ).generation_id
    write_artifacts(conn, built.document_id, generation_id, pages=1, sections=1, chunks=2)
    sent = rows("load", "parse", "chunk", "embed", "write")

    answers = rpc.complete_many(
        WORKER,
        [
            CompleteItem(
                built.job_id, built.document_id, built.lease_token, generation_id, worker_id=WORKER, stages=sent
            ),
            CompleteItem(plain.job_id, plain.document_id, plain.lease_token, worker_id=WORKER, stages=rows("load")),
        ],
    )

    assert [a.ok for a in answers] == [True, True]
    stages = logged(conn, built.job_id)
    assert [s["stage"] for s in stages] == ["load", "parse", "chunk", "embed", "write", "commit"]
    assert {s["worker_id"] for s in stages} == {WORKER}
    assert [(s["started_at"], s["finished_at"], s["detail"]) for s in stages[:5]] == [
        (r.started_at, r.finished_at, r.detail) for r in sent
    ]
    commit = stages[-1]
    assert commit["detail"]["completes_job"] is True and 0 <= commit["detail"]["seconds"] < 60
    assert commit["started_at"] <= commit["finished_at"]
    assert [s["stage"] for s in logged(conn, plain.job_id)] == ["load"]  # nothing committed: no commit row


def test_an_item_whose_token_was_superseded_writes_none_of_its_rows(conn):
    rpc = IngestionRpc(conn)
    kept, lost = claimed(conn, 2)
    make_lease_stale(conn, lost.job_id)
    [taken] = rpc.claim("worker-2")
    assert taken.job_id == lost.job_id

    answers = rpc.complete_many(
        WORKER,
        [
            CompleteItem(lost.job_id, lost.document_id, lost.lease_token, worker_id=WORKER, stages=rows("load")),
            CompleteItem(kept.job_id, kept.document_id, kept.lease_token, worker_id=WORKER, stages=rows("load")),
        ],
    )
    failed = rpc.fail_or_retry_many(
        WORKER,
        [
            FailItem(
                lost.job_id,
                lost.document_id,
                lost.lease_token,
                error_message="x",
                worker_id=WORKER,
                stages=rows("parse", error="x"),
            )
        ],
    )

    assert [(a.ok, a.reason) for a in answers] == [(False, "lease_lost"), (True, None)]
    assert failed[0].lease_lost
    assert logged(conn, lost.job_id) == []
    assert [s["stage"] for s in logged(conn, kept.job_id)] == ["load"]
    assert job(conn, lost.job_id)["status"] == "processing"


@pytest.mark.parametrize("retry", [False, True])
def test_a_failure_or_retry_writes_its_stage_rows_with_the_error(conn, retry):
    rpc = IngestionRpc(conn)
    seed_job(conn, max_attempts=3)
    [claim] = rpc.claim(WORKER)

    [answer] = rpc.fail_or_retry_many(
        WORKER,
        [
            FailItem(
                claim.job_id,
                claim.document_id,
                claim.lease_token,
                retry=retry,
                error_message="boom",
                stage="retry_wait" if retry else "failed",
                retry_delay_seconds=0 if retry else None,
                worker_id=WORKER,
                stages=rows("load") + rows("parse", error="boom"),
            )
        ],
    )

    assert answer.ok and answer.retried is retry
    stages = logged(conn, claim.job_id)
    assert [(s["stage"], s["detail"].get("error")) for s in stages] == [("load", None), ("parse", "boom")]
    assert job(conn, claim.job_id)["status"] == ("pending" if retry else "failed")


def test_malformed_stage_rows_refuse_the_whole_call_and_change_nothing(conn):
    seed_job(conn)
    [claim] = IngestionRpc(conn).claim(WORKER)
    before = snapshot(conn)
    items = psycopg.types.json.Jsonb(
        [
            {
                "job_id": str(claim.job_id),
                "document_id": str(claim.document_id),
                "lease_token": claim.lease_token,
                "stages": [{"stage": "load"}],
            }
        ]
    )

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="needs stage and started_at"):
        conn.execute("select complete_ingestion_jobs(%s)", (items,))
    conn.rollback()

    assert snapshot(conn) == before


class CountingStages(IngestionRpc):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stage_calls = 0

    def record_stage(self, *args, **kwargs):
        self.stage_calls += 1
        return super().record_stage(*args, **kwargs)


def test_the_worker_logs_every_stage_in_its_acknowledgement_on_both_schemas_of_the_window(lock_order_schema, new_conn):
    url = lock_order_schema.url
    settings = load_settings(database_url=url, parse_processes=0)
    with make_pool(url, settings) as pool:
        enqueue_files(pool, [FIXTURES / "sample.md"], max_bytes=settings.max_file_bytes)
        rpc = CountingStages(pool, stale_after_seconds=settings.stale_after_seconds)
        [result] = Worker(pool, settings, rpc=rpc).run(drain=True).results

    assert rpc.schema_level is (
        SchemaLevel.DOCUMENT_VERSIONS if lock_order_schema.hardened else SchemaLevel.STAGES_IN_ACKS
    )
    assert [s["stage"] for s in logged(new_conn(url), result.job_id)] == [
        "load",
        "parse",
        "chunk",
        "embed",
        "write",
        "commit",
    ]
    assert rpc.stage_calls == 0
