"""Shared by the settings tests: a clean environment, and the one-line error a bad setting
gives."""

from __future__ import annotations

import os

import pytest

from ingestion_pipeline.errors import ConfigError
from ingestion_pipeline.settings import load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No DATABASE_URL / INGEST_* from the caller's shell, and no stray .env file."""
    for name in list(os.environ):
        if name.upper() == "DATABASE_URL" or (
            name.upper().startswith("INGEST_") and name.upper() != "INGEST_SEARCH_SERVER"
        ):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def config_error(**overrides) -> str:
    with pytest.raises(ConfigError) as raised:
        load_settings(**overrides)
    message = str(raised.value)
    assert "\n" not in message
    return message
