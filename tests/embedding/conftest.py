"""Fixtures of the embedding tests: a local OpenAI-compatible server per test, and settings
that point the openai embedder at it with fast retries (no client backoff, no queue backoff)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from ingest_testing.openai_server import OpenAIServer
from ingestion_pipeline.processing.openai_embedder import OpenAIEmbedder
from ingestion_pipeline.settings import load_settings


@pytest.fixture(autouse=True)
def no_caller_embedder_settings(monkeypatch):
    """The caller's shell may hold a real key or another embedder: none of it applies here."""
    for name in list(os.environ):
        if name.upper() in ("OPENAI_API_KEY", "OPENAI_BASE_URL") or name.upper().startswith(
            ("INGEST_OPENAI_", "INGEST_EMBEDDER")
        ):
            monkeypatch.delenv(name)


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def openai_settings(openai_server):
    """openai_settings(**overrides): settings for the openai embedder on the test server. The
    client does not retry (each fault reaches the queue) and a failed job is claimable again
    at once (retry_backoff_seconds=0)."""

    def make(**overrides):
        values = dict(
            embedder="openai",
            openai_base_url=openai_server.url,
            openai_model=openai_server.model,
            openai_api_key=openai_server.api_key,
            openai_max_retries=0,
            openai_timeout_seconds=5,
            retry_backoff_seconds=0,
        )
        return load_settings(**{**values, **overrides})

    return make


@pytest.fixture
def make_embedder(openai_server):
    """make_embedder(**overrides): an OpenAIEmbedder on the test server, without client retries."""

    def make(**overrides) -> OpenAIEmbedder:
        values = dict(
            model=openai_server.model,
            base_url=openai_server.url,
            api_key=SecretStr(openai_server.api_key),
            max_retries=0,
            timeout_seconds=5,
        )
        return OpenAIEmbedder(**{**values, **overrides})

    return make
