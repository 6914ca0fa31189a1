"""Whose is a test database on a server that outlives the suite (TEST_DATABASE_URL's): each
database the suite makes there carries a comment naming its run, and each run (a pytest
process: one per xdist worker) holds an advisory lock on its own number for as long as it lives.

A session drops its own databases at its end; a run killed before that (a timeout, Ctrl-C twice,
an xdist worker that died) cannot, so every session also drops, as it starts and as it ends,
the marked databases of runs that no longer hold their lock. Databases of runs still going (other
xdist workers, another checkout's suite on the same server) and databases not made by the suite
are never touched."""

from __future__ import annotations

import secrets

import psycopg
from psycopg import sql

from ingestion_pipeline.db.connection import connect

LOCK_CLASS = 0x1D6E  # the first key of the runs' two-key advisory locks
COMMENT = "ingestion-pipeline test run "


class Run:
    """This process's mark on one server: its lock, held until close()."""

    def __init__(self, admin_url: str):
        self.number = secrets.randbelow(2**31 - 1) + 1
        self._conn = connect(admin_url, autocommit=True)
        self._conn.execute("select pg_advisory_lock(%s, %s)", (LOCK_CLASS, self.number))

    def mark(self, conn: psycopg.Connection, name: str) -> None:
        comment = sql.Literal(f"{COMMENT}{self.number}")
        conn.execute(sql.SQL("comment on database {} is {}").format(sql.Identifier(name), comment))

    def close(self) -> None:
        self._conn.close()


def drop_abandoned(admin_url: str) -> list[str]:
    """Drop the databases marked by runs that hold no lock any more: their names."""
    with connect(admin_url, autocommit=True) as conn:
        marked = conn.execute(
            "select datname, shobj_description(oid, 'pg_database') as comment from pg_database"
            " where shobj_description(oid, 'pg_database') like %s",
            (COMMENT + "%",),
        ).fetchall()
        alive = {
            int(row["objid"])
            for row in conn.execute(
                "select objid::bigint as objid from pg_locks"
                " where locktype = 'advisory' and objsubid = 2 and classid::bigint = %s and granted",
                (LOCK_CLASS,),
            ).fetchall()
        }
        dropped = []
        for row in marked:
            number = row["comment"].removeprefix(COMMENT)
            if number.isdigit() and int(number) not in alive:
                conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(row["datname"])))
                dropped.append(row["datname"])
    return sorted(dropped)
