"""Race tests force each interleaving with several real connections and lock barriers
(observed through pg_blocking_pids) or lease timestamps set in the past; none relies on
a sleep for ordering. Tests taking the `schema` fixture run twice: on the pre-hardening
schema, where they assert the bug (docs/state-machine.md), and at head, where they assert the fix."""

from collections.abc import Iterator

import psycopg
import pytest

from ingestion_pipeline.db.connection import connect


@pytest.fixture
def open_connections() -> Iterator[list[psycopg.Connection]]:
    """Connections a test opens in addition to its main one; closed at teardown."""
    made: list[psycopg.Connection] = []
    yield made
    for connection in made:
        connection.close()


@pytest.fixture
def new_conn(open_connections):
    def make(url: str, autocommit: bool = True) -> psycopg.Connection:
        connection = connect(url, autocommit=autocommit)
        open_connections.append(connection)
        return connection

    return make
