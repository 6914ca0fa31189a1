"""Dagster tests run against a persistent test instance and real databases."""

import dagster as dg
import pytest

from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource


@pytest.fixture
def instance():
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def resources(db_url):
    return {"database": DatabaseResource(database_url=db_url), "processing": ProcessingResource()}
