"""A reader's calls from Python run under its role's statement_timeout (issue 58, defect 5).

PostgREST applies a role's settings (ALTER ROLE … SET statement_timeout, pg_db_role_setting)
when it switches to the role; a SET ROLE does not. `Index.search(reader=…)`, the passages and
sections, the retrievers, MCP and `--as-user`/`--as-anon` all act as the reader through
`as_reader` (act_as_reader), which now sets the role's timeout for the transaction too.

Roles are the cluster's: each test sets the timeout for its own database only
(ALTER ROLE … IN DATABASE, which a drop of the database removes), so tests on other databases
see nothing. No timing decides an outcome: the end-to-end search is held on a table lock that
another connection holds until the test ends, so it cannot finish before any timeout; the
role's timeout (50 ms) is far below the session's lock_timeout (10 s), which cancels it
otherwise (what the search met before the fix)."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql

from ingestion_pipeline import Index
from ingestion_pipeline.api import IngestError, Reader
from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.search.rpc import as_reader

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def set_in_database(conn: psycopg.Connection, role: str, name: str, value: str) -> None:
    """`role`'s setting `name` in this database only (gone with the database)."""
    conn.execute(
        sql.SQL("alter role {} in database {} set {} = {}").format(
            sql.Identifier(role), sql.Identifier(conn.info.dbname), sql.Identifier(name), sql.Literal(value)
        )
    )


def role_wide_timeout(conn: psycopg.Connection, role: str) -> str | None:
    row = conn.execute(
        """select substr(c, strpos(c, '=') + 1) as value
             from pg_db_role_setting s join pg_roles r on r.oid = s.setrole, unnest(s.setconfig) c
            where r.rolname = %s and s.setdatabase = 0 and c like 'statement^_timeout=%%' escape '^'""",
        (role,),
    ).fetchone()
    return row["value"] if row else None


def timeout_as(conn: psycopg.Connection, reader: Reader | None) -> str:
    with as_reader(conn, reader):
        row = conn.execute("select current_setting('statement_timeout') as value").fetchone()
    return row["value"]


def test_a_reader_runs_under_its_roles_statement_timeout(db_url):
    with connect(db_url) as conn:
        conn.execute("set statement_timeout = '17s'")  # the session's own: the owner keeps it
        anon, authenticated = (role_wide_timeout(conn, role) for role in ("anon", "authenticated"))
        # the role's setting everywhere (the migration's 3 s and 8 s, or the cluster's own)
        assert timeout_as(conn, Reader()) == (anon or "17s")
        assert timeout_as(conn, Reader(uuid4())) == (authenticated or "17s")

        # this database's setting comes first
        set_in_database(conn, "anon", "statement_timeout", "1234ms")
        set_in_database(conn, "authenticated", "statement_timeout", "4321ms")
        assert timeout_as(conn, Reader()) == "1234ms"
        assert timeout_as(conn, Reader(uuid4())) == "4321ms"
        assert timeout_as(conn, None) == "17s"
        # for the reader's transaction only
        assert conn.execute("select current_setting('statement_timeout') as value").fetchone()["value"] == "17s"


def test_a_readers_calls_are_cancelled_at_its_roles_timeout(db_url, new_conn, capsys):
    owner = new_conn(db_url)
    with Index.open(db_url) as index:
        index.enqueue(SAMPLES / "postgres-leases.md", collection="handbook")
        index.work(drain=True, parse_processes=0)
        owner.execute("select add_collection('handbook', true)")
        hits = index.search("fencing", mode="lexical", reader=Reader())  # under its role-wide timeout
        assert hits and index.sections(hits[0].document_id, reader=Reader())
    set_in_database(owner, "anon", "statement_timeout", "50ms")
    owner.execute(sql.SQL("alter database {} set lock_timeout = '10s'").format(sql.Identifier(owner.info.dbname)))

    holder = new_conn(db_url, autocommit=False)
    # what the search, the sections and the passages read, held until the test ends
    holder.execute("lock table searchable_chunks, document_sections, document_chunks in access exclusive mode")
    message = "canceling statement due to statement timeout (as anon, statement_timeout 50ms)"
    try:
        with Index.open(db_url) as index:
            calls = {
                "search": lambda: index.search("fencing", mode="lexical", reader=Reader()),
                "sections": lambda: index.sections(hits[0].document_id, reader=Reader()),
                "passages": lambda: index.passages(hits, reader=Reader()),
            }
            for name, call in calls.items():
                with pytest.raises(IngestError) as refused:
                    call()
                assert str(refused.value) == message, name

        capsys.readouterr()
        assert ingest(["search", "fencing", "--as-anon", "--mode", "lexical", "--database-url", db_url]) == 1
        assert capsys.readouterr().err == f"ingest: error: {message}\n"
    finally:
        holder.rollback()
