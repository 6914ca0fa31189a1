"""The typed RPC client: a full job lifecycle through a pool, the operator and janitor
RPCs, and the schema support window (this release's schema and the previous release's,
learned from the catalog once; anything older refused before any call)."""

import logging
import uuid

import psycopg
import pytest

from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db import schema_level
from ingestion_pipeline.db.connection import connect, make_pool
from ingestion_pipeline.db.models import ClaimedJob
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import SchemaTooOld
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Outcome, Worker
from tests.any_schema_rpc import OLD_SQL, AnySchemaRpc, FenceLevel
from tests.conftest import LOCK_ORDER_NAME, STAGE_ROWS_NAME, version_before
from tests.helpers import (
    batch,
    document,
    index_document,
    job,
    make_lease_stale,
    seed_batch,
    seed_document,
    seed_job,
    start_reindex_build,
    write_artifacts,
)


def test_a_job_goes_from_enqueue_to_completed_through_a_pool(pool, conn):
    rpc = IngestionRpc(pool)
    batch_id = rpc.create_batch("reports", {"source": "test"}).batch_id
    document_id = seed_document(conn, batch_id)
    assert rpc.enqueue(document_id, batch_id=batch_id).ok
    assert rpc.refresh_batch(batch_id).status == "processing"

    [claimed] = rpc.claim("worker-1", limit=5)
    assert isinstance(claimed, ClaimedJob)
    assert (claimed.document_id, claimed.batch_id, claimed.attempt_count) == (document_id, batch_id, 1)
    assert claimed.committed_generation_id is None
    assert claimed.lease_token == 1 and claimed.lease_expires_at > claimed.locked_at
    token = claimed.lease_token
    beat = rpc.heartbeat(claimed.job_id, "worker-1", lease_token=token, progress=50, stage="chunk")
    assert beat.ok and beat.locked_at is not None and beat.lease_expires_at > beat.locked_at
    generation = rpc.begin_generation(claimed.job_id, document_id, "worker-1", lease_token=token)
    write_artifacts(conn, document_id, generation.generation_id, chunks=2)
    outcome = rpc.commit_and_complete(
        claimed.job_id,
        document_id,
        generation.generation_id,
        worker_id="worker-1",
        lease_token=token,
        batch_id=batch_id,
    )

    assert outcome.ok and outcome.fenced and outcome.chunk_count == 2
    assert rpc.schema_level is schema_level.CURRENT
    assert batch(conn, batch_id)["status"] == "completed"
    assert document(conn, document_id)["status"] == "indexed"


@pytest.mark.parametrize("before", ["pre_hardening", "pre_stage_rows"])
def test_a_schema_older_than_the_previous_release_is_refused_until_it_is_migrated(before, pg_server, template_before):
    """The oldest schema there is, and the newest one below the window: the first state
    call says what to do and changes nothing; once migrated, the same client works."""
    name = "harden_state_rpcs" if before == "pre_hardening" else STAGE_ROWS_NAME
    dbname = f"ingest_t_window_{before}_{uuid.uuid4().hex[:8]}"
    url = pg_server.create_database(dbname, template=template_before(name))
    try:
        with connect(url) as conn:
            rpc = IngestionRpc(conn)
            document_id, job_id = seed_job(conn)
            for call in (lambda: rpc.claim("worker-1"), lambda: rpc.heartbeat(job_id, "worker-1", lease_token=1)):
                with pytest.raises(SchemaTooOld, match=r"stage_rows_in_acks is not applied.*ingest db migrate"):
                    call()
            assert (job(conn, job_id)["status"], job(conn, job_id)["locked_by"]) == ("pending", None)

            migrator.migrate(url)
            [claimed] = rpc.claim("worker-1")
            assert rpc.schema_level is schema_level.CURRENT and claimed.lease_token is not None
            assert rpc.complete(job_id, document_id, worker_id="worker-1", lease_token=claimed.lease_token).ok
    finally:
        pg_server.drop_database(dbname)


def test_a_worker_drains_the_previous_release_schema_and_says_so_once(pg_server, template_before, caplog):
    """The rolling-upgrade window seen from the other side: this release's worker on a
    database a deployment has not migrated yet."""
    dbname = f"ingest_t_previous_{uuid.uuid4().hex[:8]}"
    url = pg_server.create_database(dbname, template=template_before(LOCK_ORDER_NAME))
    try:
        with connect(url) as conn:
            newest = conn.execute("select max(version) as v from ingest_schema_migrations").fetchone()["v"]
            assert newest == version_before(LOCK_ORDER_NAME)
            for _ in range(3):
                seed_job(conn)
        settings = load_settings(database_url=url)
        with caplog.at_level(logging.WARNING), make_pool(url, settings) as pool:
            worker = Worker(pool, settings)
            report = worker.run(drain=True)
        assert [r.outcome for r in report.results] == [Outcome.COMPLETED] * 3, report.results
        assert worker.rpc.schema_level is schema_level.SchemaLevel.STAGES_IN_ACKS
        warnings = [r.getMessage() for r in caplog.records if "previous release's schema" in r.getMessage()]
        assert len(warnings) == 1, warnings
    finally:
        pg_server.drop_database(dbname)


def test_the_schema_level_is_learned_once_from_the_catalog(db_url, monkeypatch):
    probes = []
    real_probe = schema_level.probe
    monkeypatch.setattr(schema_level, "probe", lambda conn: probes.append(1) or real_probe(conn))
    with connect(db_url) as conn:
        rpc = IngestionRpc(conn)
        document_id, job_id = seed_job(conn)
        [claimed] = rpc.claim("worker-1")
        for _ in range(3):
            assert rpc.heartbeat(job_id, "worker-1", lease_token=claimed.lease_token).ok
        assert rpc.claim("worker-2") == []
        assert rpc.fail_or_retry(job_id, document_id, worker_id="worker-1", lease_token=claimed.lease_token).ok
    assert len(probes) == 1


@pytest.mark.parametrize("level", ["worker_id", "lease_token"])
def test_an_undefined_function_is_an_error_never_an_unfenced_fallback(level, db_url, pre_tokens_db_url):
    """Earlier clients took any SQLSTATE 42883 from a fenced call for an old schema and
    retried unfenced: a worker id of the wrong type was enough to complete a job held by
    another worker. Now the error surfaces and nothing changes."""
    url = db_url if level == "lease_token" else pre_tokens_db_url
    with connect(url) as conn:
        rpc = AnySchemaRpc(conn)
        document_id, job_id = seed_job(conn)
        rpc.claim("worker-1")
        assert rpc.fence_level is (FenceLevel.DOCUMENT_VERSIONS if level == "lease_token" else FenceLevel.WORKER_ID)
        with pytest.raises(psycopg.errors.UndefinedFunction):
            rpc.complete(job_id, document_id, worker_id=12345)  # an int where text belongs
        with pytest.raises(psycopg.errors.UndefinedFunction):
            rpc.heartbeat(job_id, 12345)
        assert job(conn, job_id)["status"] == "processing"
        assert job(conn, job_id)["locked_by"] == "worker-1"

        # What the old fallback called next: the unfenced form. Before the lease tokens it
        # completes a job another worker holds (observed, then rolled back); from
        # …_one_lock_order.sql a call with neither token nor worker id is refused (22023).
        legacy = {"job_id": job_id, "document_id": document_id, "batch_id": None, "stage": "indexed"}
        with conn.transaction(force_rollback=True):
            if level == "lease_token":
                with pytest.raises(psycopg.errors.InvalidParameterValue, match="lease token"):
                    conn.execute(OLD_SQL["rpc_complete_legacy"], legacy)
            else:
                conn.execute(OLD_SQL["rpc_complete_legacy"], legacy)
                assert job(conn, job_id)["status"] == "completed"
        assert job(conn, job_id)["status"] == "processing"


def test_retry_refuses_completed_and_live_jobs_and_requeues_failed_ones(conn):
    rpc = IngestionRpc(conn)
    seed_job(conn)
    document_id, _ = index_document(rpc, conn)
    completed_job = conn.execute("select id from ingestion_jobs where document_id = %s", (document_id,)).fetchone()[
        "id"
    ]
    assert rpc.retry(completed_job).reason == "completed"

    other_document, live_job = seed_job(conn)
    rpc.claim("worker-1")
    assert rpc.retry(live_job).reason == "lease_live"

    rpc.fail_or_retry(live_job, other_document, worker_id="worker-1", error_message="bad pdf")
    retried = rpc.retry(live_job)
    assert retried.ok
    assert (job(conn, live_job)["status"], job(conn, live_job)["attempt_count"]) == ("pending", 0)
    assert document(conn, other_document)["status"] == "queued"


def test_expire_stale_dead_letters_only_exhausted_leases(conn):
    rpc = IngestionRpc(conn)
    batch_id = seed_batch(conn)
    _, exhausted = seed_job(conn, batch_id, max_attempts=1)
    _, retryable = seed_job(conn, batch_id, max_attempts=3)
    rpc.claim("worker-1", limit=2)
    make_lease_stale(conn, exhausted)
    make_lease_stale(conn, retryable)

    result = rpc.expire_stale()
    assert result.expired == 1 and result.job_ids == [exhausted]
    assert (job(conn, exhausted)["status"], job(conn, exhausted)["stage"]) == ("failed", "dead_letter")
    assert job(conn, retryable)["status"] == "processing"  # left for a reclaim
    assert batch(conn, batch_id)["failed_files"] == 1


def test_cleanup_dry_run_reports_what_the_delete_removes(conn):
    rpc = IngestionRpc(conn)
    seed_job(conn)
    document_id, committed = index_document(rpc, conn)
    reindex, _abandoned = start_reindex_build(rpc, conn, document_id, "worker-2", pages=1, sections=2, chunks=4)
    rpc.fail_or_retry(reindex.job_id, document_id, worker_id="worker-2", error_message="crash")

    dry = rpc.cleanup_generations(dry_run=True)
    real = rpc.cleanup_generations(dry_run=False)
    counts = lambda r: (r.documents, r.pages, r.sections, r.chunks, r.generations)  # noqa: E731
    assert counts(dry) == counts(real) == (1, 1, 2, 4, 1)
    assert rpc.cleanup_generations(dry_run=False).generations == 0
    assert document(conn, document_id)["index_generation_id"] == committed
    left = conn.execute("select count(*) as n from document_chunks where document_id = %s", (document_id,)).fetchone()
    assert left["n"] == 3  # the committed generation is untouched


def test_queue_health_counts_what_needs_attention(conn):
    rpc = IngestionRpc(conn)
    seed_job(conn)
    document_id, _ = index_document(rpc, conn, chunks=3)
    _, stale_job = seed_job(conn)
    rpc.claim("worker-1")
    make_lease_stale(conn, stale_job)
    seed_job(conn)  # pending
    conn.execute("update documents set chunk_count = 42 where id = %s", (document_id,))

    health = rpc.queue_health()
    assert health.jobs_by_status == {"completed": 1, "processing": 1, "pending": 1}
    assert health.stale_leases == 1
    assert health.count_mismatches == 1
    assert health.oldest_pending_age_seconds is not None
