"""`ingest ui` rebuilds the pipeline URL for Dagster's storage (SQLAlchemy + psycopg2): the
connection options must survive, so what psycopg2 is asked to connect with equals what
the pipeline's own URL says (but for the database name)."""

import psycopg
import pytest
from sqlalchemy.dialects.postgresql.psycopg2 import PGDialect_psycopg2
from sqlalchemy.engine import make_url

from ingestion_pipeline.orchestration.instance import sqlalchemy_url

URLS = [
    "postgresql://u:p@db.example.com:6543/app?sslmode=verify-full&sslrootcert=/etc/ssl/ca%20root.pem",
    "postgresql://u:p%40ss%2Fw:rd@[::1]:5432/app?sslmode=require",
    "postgresql://u@[2001:db8::5]/app",
    "host=::1 port=5433 user=u password='pa ss' dbname=app sslmode=verify-ca sslcert=/c.pem sslkey=/k.pem",
    "host=db.internal user=worker dbname=app application_name='ingest ui' options='-c statement_timeout=5s' "
    "target_session_attrs=read-write connect_timeout=7",
    "postgresql://postgres@/postgres?host=/tmp/embedded%20pg&port=61234",
    "host=/var/run/postgresql dbname=app user=u sslmode=disable",
    "host=a.example,b.example port=5432,5433 dbname=app user=u target_session_attrs=read-write",
    "postgresql://u@localhost/app",
]


def _what_psycopg2_gets(url: str) -> dict[str, str]:
    _, kwargs = PGDialect_psycopg2().create_connect_args(make_url(url))
    return {key: str(value) for key, value in kwargs.items()}


@pytest.mark.parametrize("url", URLS)
def test_every_connection_option_survives(url):
    expected = psycopg.conninfo.conninfo_to_dict(url)
    expected["dbname"] = "dagster"
    expected.setdefault("user", "postgres")

    rebuilt = sqlalchemy_url(url, "dagster")

    assert rebuilt.startswith("postgresql+psycopg2://")
    assert _what_psycopg2_gets(rebuilt) == {key: str(value) for key, value in expected.items()}


def test_ipv6_host_is_bracketed():
    rebuilt = sqlalchemy_url("host=::1 port=5432 user=u password=p dbname=app", "dagster")
    assert rebuilt == "postgresql+psycopg2://u:p@[::1]:5432/dagster"
    assert make_url(rebuilt).host == "::1" and make_url(rebuilt).port == 5432


def test_verify_full_stays_verify_full():
    rebuilt = sqlalchemy_url("postgresql://u@h/app?sslmode=verify-full&sslrootcert=/ca.pem", "dagster")
    assert make_url(rebuilt).query == {"sslmode": "verify-full", "sslrootcert": "/ca.pem"}
