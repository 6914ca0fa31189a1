"""RPCs: revoked from PUBLIC, granted to ingestion_worker, search_path pinned."""

import psycopg
import pytest

from ingestion_pipeline.db.rpc import IngestionRpc
from tests.helpers import seed_job

OUTSIDER = "ingest_test_outsider"


def rpc_signatures(conn):
    rows = conn.execute(
        """select p.oid::regprocedure::text as signature, p.proconfig, p.prosecdef
             from pg_proc p
            where p.pronamespace = 'public'::regnamespace
              and (p.proname like '%%ingestion%%' or p.proname like '%%import_batch%%'
                   or p.proname like '%%index_generation%%')""").fetchall()
    assert len(rows) >= 14
    return rows


@pytest.fixture
def outsider(conn):
    conn.execute(f"""do $$ begin
        if not exists (select 1 from pg_roles where rolname = '{OUTSIDER}') then
            create role {OUTSIDER} nologin;
        end if; end $$""")
    conn.execute(f"grant usage on schema public to {OUTSIDER}")
    return OUTSIDER


def test_every_rpc_pins_search_path_and_runs_as_definer(conn):
    for row in rpc_signatures(conn):
        assert any(c.startswith("search_path=") for c in row["proconfig"] or []), row["signature"]
        assert row["prosecdef"], row["signature"]


def test_a_role_without_the_grant_cannot_execute(conn, outsider):
    seed_job(conn)
    for row in rpc_signatures(conn):
        allowed = conn.execute("select has_function_privilege(%s, %s, 'execute') as ok",
                               (outsider, row["signature"])).fetchone()["ok"]
        assert not allowed, row["signature"]
    conn.execute(f"set role {outsider}")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        IngestionRpc(conn).claim("intruder")
    conn.execute("reset role")


def test_the_worker_role_runs_rpcs_but_cannot_write_the_queue(conn):
    _, job_id = seed_job(conn)
    conn.execute("set role ingestion_worker")
    try:
        [claimed] = IngestionRpc(conn).claim("worker-1")
        assert claimed.job_id == job_id
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("update ingestion_jobs set status = 'completed'")
    finally:
        conn.execute("reset role")


def test_supabase_roles_get_nothing(pg_server, templates, conn):
    """When anon/authenticated exist at migration time, they get no EXECUTE, even where
    default privileges (as on Supabase) would hand it to every new function."""
    for role in ("anon", "authenticated"):
        conn.execute(f"""do $$ begin
            if not exists (select 1 from pg_roles where rolname = '{role}') then
                create role {role} nologin;
            end if; end $$""")
    from ingestion_pipeline.db import migrate as migrator
    from tests.conftest import _fresh_database

    for url in _fresh_database(pg_server, "template0"):
        with psycopg.connect(url, autocommit=True) as fresh:
            fresh.execute("alter default privileges in schema public "
                          "grant execute on functions to anon, authenticated")
            fresh.execute("alter default privileges in schema public "
                          "grant all on tables to anon, authenticated")
        migrator.migrate(url)
        with psycopg.connect(url, autocommit=True) as fresh:
            for role in ("anon", "authenticated"):
                granted = fresh.execute(
                    "select count(*) from pg_proc p where p.pronamespace = 'public'::regnamespace "
                    "and p.proname like '%%ingestion_job%%' and has_function_privilege(%s, p.oid, 'execute')",
                    (role,)).fetchone()[0]
                assert granted == 0, role
                writable = fresh.execute(
                    "select count(*) from pg_class c where c.relnamespace = 'public'::regnamespace "
                    "and c.relkind in ('r', 'v') and (has_table_privilege(%s, c.oid, 'select') "
                    "or has_table_privilege(%s, c.oid, 'update'))", (role, role)).fetchone()[0]
                assert writable == 0, role
