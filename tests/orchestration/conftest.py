"""Dagster tests run against a persistent test instance and real databases."""

import dagster as dg
import pytest

from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from tests.browser import chromium_path
from tests.tools import require_tools


@pytest.fixture
def instance():
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def resources(db_url):
    return {"database": DatabaseResource(database_url=db_url), "processing": ProcessingResource()}


@pytest.fixture
def chromium() -> str:
    """The Debian chromium; a UI test skips without it (fails under CI as root: tests/tools.py)."""
    found = chromium_path()
    if found is None:
        require_tools(["chromium"], "a UI test")
    assert found is not None
    return found
