"""Fixtures shared by the integration tests."""

import pytest

from tests.pooler import pgbouncer


@pytest.fixture
def pooler(db_url):
    """A real PgBouncer in transaction mode in front of a fresh head database."""
    with pgbouncer(db_url) as running:
        yield running
