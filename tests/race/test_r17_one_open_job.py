"""R17: two concurrent enqueues for one document give one open job and one already_queued."""

from ingestion_pipeline.db.rpc import IngestionRpc
from tests.helpers import Background, backend_pid, seed_document, wait_until_blocked


def test_concurrent_enqueues_make_one_open_job(db_url, new_conn):
    setup = new_conn(db_url)
    document_id = seed_document(setup)

    first_tx = new_conn(db_url, autocommit=False)
    first_tx.execute("select 1")
    first = IngestionRpc(first_tx).enqueue(document_id)
    assert first.ok

    second_conn = new_conn(db_url)
    second_pid = backend_pid(second_conn)
    second = Background(lambda: IngestionRpc(second_conn).enqueue(document_id))
    wait_until_blocked(setup, second_pid, by=backend_pid(first_tx))  # on the unique index
    first_tx.commit()

    outcome = second.join()
    assert not outcome.ok
    assert outcome.reason == "already_queued"
    assert outcome.job_id == first.job_id
    open_jobs = setup.execute("select count(*) as n from ingestion_jobs where document_id = %s "
                              "and status in ('pending', 'processing')", (document_id,)).fetchone()
    assert open_jobs["n"] == 1


def test_enqueue_of_an_unknown_document_is_refused(conn):
    import uuid

    outcome = IngestionRpc(conn).enqueue(uuid.uuid4())
    assert (outcome.ok, outcome.reason) == (False, "document_not_found")
