"""Dagster tests run against a persistent test instance and real databases."""

import dagster as dg
import pytest

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
from ingestion_pipeline.settings import load_settings


@pytest.fixture
def instance():
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def resources(db_url):
    return {"database": DatabaseResource(database_url=db_url), "processing": ProcessingResource()}


@pytest.fixture
def pool(db_url):
    pool = make_pool(db_url, load_settings(database_url=db_url))
    yield pool
    pool.close()
