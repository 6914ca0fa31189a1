from pathlib import Path

from tests.helpers import seed_batch, seed_job


def test_head_template_has_every_migration(conn):
    rows = conn.execute("select count(*) as n from ingest_schema_migrations").fetchone()
    assert rows["n"] == len(list((Path(__file__).resolve().parents[2] / "migrations").glob("2*.sql")))


def test_seed(conn):
    batch_id = seed_batch(conn)
    _, job_id = seed_job(conn, batch_id)
    assert job_id is not None
