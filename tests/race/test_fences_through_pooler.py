"""The fence tests of the race suite (test_lease_tokens.py, test_artifact_fence.py) through
a real PgBouncer in transaction mode (tests/pooler.py), at head only: the pooler is about
the client and its RPCs, not about the old schemas.

The test bodies are those of the two modules (tests/race/artifact_fence_cases.py and
lease_token_cases.py, which both modules call): each has a wrapper here with the same name
and parameters, where `token_schema` is overridden by a head database whose `url` is
PgBouncer's. So every connection a test opens on `token_schema.url` goes through the
pooler: each worker's RPCs (claim, heartbeat, begin, record_stage, commit, complete,
fail_or_retry, commit_and_complete, expire_stale), its artifact writes (the worker's COPY
in one transaction, plain INSERTs, INSERTs as ingestion_worker) and the tests' own set-up
and reads (seeding, lease timestamps moved into the past, snapshots): none of them needs a
session. What does stays on the server itself (`token_schema.direct_url`): the row-lock
barrier of the in-flight commit-and-complete and the observer that sees the worker's
statement blocked on it (pg_blocking_pids). Behind the pooler the worker's statement runs
on the server connection it is handed for that call, not the one an earlier
pg_backend_pid() answered from, so it is found by its application_name, which PgBouncer
sets on that connection (tests/helpers.py wait_until_client_blocked). The worker role is
taken with `set local role` (a session's `set role` would stay on a pooled connection).

One session setting is left as the bodies have it: the hold-off test's `set lock_timeout`,
a guard that turns a block into a failure. Through the pooler it lands on the server
connection PgBouncer hands out for that statement. As a guard that holds whatever
connection a statement gets, the database itself has a lock_timeout here, longer than any
wait a test forces (the in-flight commit-and-complete waits a few milliseconds), set
before the pooler opens its first server connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg import sql

from ingestion_pipeline.db.connection import connect
from tests.conftest import PgServer, Schema, Templates, _fresh_database
from tests.pooler import pgbouncer, pgbouncer_binary
from tests.race import artifact_fence_cases, lease_token_cases
from tests.race.artifact_fence_cases import WRITERS

LOCK_TIMEOUT = "10s"


pytestmark = pytest.mark.pooler


@pytest.fixture
def token_schema(pg_server: PgServer, templates: Templates) -> Iterator[Schema]:
    """A fresh head database behind its own PgBouncer (transaction mode, a pool of several
    server connections): `url` is the pooler's, `direct_url` the server's. Without PgBouncer
    the test skips before a database is made."""
    pgbouncer_binary()
    for url in _fresh_database(pg_server, templates.head):
        with connect(url) as conn:
            dbname = conn.info.dbname
            conn.execute(
                sql.SQL("alter database {} set lock_timeout = {}").format(
                    sql.Identifier(dbname), sql.Literal(LOCK_TIMEOUT)
                )
            )
        with pgbouncer(url) as pooler:
            schema = Schema(url=pooler.url(), hardened=True, server_url=url)
            with connect(schema.url) as through:
                assert through.execute("show lock_timeout").fetchone()["lock_timeout"] == LOCK_TIMEOUT
            yield schema


def test_the_workers_connections_go_through_the_pooler(token_schema, new_conn):
    """The fixture's `url` is PgBouncer's, in transaction mode: two clients used one after
    the other run on the same server backend, and reach the database of `direct_url`."""
    first, second = new_conn(token_schema.url), new_conn(token_schema.url)
    direct = new_conn(token_schema.direct_url)
    query = "select pg_backend_pid() as pid, current_database() as db"
    assert first.execute(query).fetchone() == second.execute(query).fetchone()
    assert first.execute(query).fetchone()["db"] == direct.execute(query).fetchone()["db"]
    assert direct.execute(query).fetchone()["pid"] != first.execute(query).fetchone()["pid"]


# The fence tests of test_artifact_fence.py and test_lease_tokens.py, with the same names and
# parameters, on `token_schema` above (through the pooler).


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_committed_generation_refuses_new_rows(token_schema, new_conn, writer):
    artifact_fence_cases.a_committed_generation_refuses_new_rows(token_schema, new_conn, writer)


def test_a_reclaimed_claim_cannot_write_into_its_own_building_generation(token_schema, new_conn):
    artifact_fence_cases.a_reclaimed_claim_cannot_write_into_its_own_building_generation(token_schema, new_conn)


def test_superseded_and_abandoned_generations_refuse_rows(token_schema, new_conn):
    artifact_fence_cases.superseded_and_abandoned_generations_refuse_rows(token_schema, new_conn)


def test_an_open_artifact_write_holds_off_a_takeover_but_not_the_heartbeat(token_schema, new_conn):
    artifact_fence_cases.an_open_artifact_write_holds_off_a_takeover_but_not_the_heartbeat(token_schema, new_conn)


def test_a_stalled_thread_of_a_reused_worker_id_is_fenced_by_its_token(token_schema, new_conn):
    lease_token_cases.a_stalled_thread_of_a_reused_worker_id_is_fenced_by_its_token(token_schema, new_conn)


def test_an_operator_retry_does_not_reset_the_token(token_schema, new_conn):
    lease_token_cases.an_operator_retry_does_not_reset_the_token(token_schema, new_conn)


def test_a_final_attempt_is_never_dead_lettered_between_commit_and_complete(token_schema, new_conn):
    lease_token_cases.a_final_attempt_is_never_dead_lettered_between_commit_and_complete(token_schema, new_conn)


def test_a_shorter_stale_window_does_not_take_a_live_lease(token_schema, new_conn):
    lease_token_cases.a_shorter_stale_window_does_not_take_a_live_lease(token_schema, new_conn)


def test_commit_refuses_a_generation_the_claim_did_not_begin(token_schema, new_conn):
    lease_token_cases.commit_refuses_a_generation_the_claim_did_not_begin(token_schema, new_conn)
