"""Dagster tests run against a persistent test instance and real databases."""

import os

import dagster as dg
import pytest

from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from tests.browser import chromium_path


@pytest.fixture
def instance():
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def resources(db_url):
    return {"database": DatabaseResource(database_url=db_url), "processing": ProcessingResource()}


@pytest.fixture
def chromium() -> str:
    """The Debian chromium; a UI test skips without it locally and fails in CI."""
    found = chromium_path()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs the Debian package)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found
