"""The embedder's settings: defaults, the key's two names, one-line errors at start naming
the setting (from the environment, `ingest work --embedder`, and the Dagster resource)."""

from __future__ import annotations

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.errors import ConfigError
from ingestion_pipeline.orchestration.resources import ProcessingResource
from ingestion_pipeline.processing import HashEmbedder, NoEmbedder, embedder_from_settings
from ingestion_pipeline.processing.openai_embedder import OpenAIEmbedder
from ingestion_pipeline.processing.static_embedder import StaticEmbedder
from ingestion_pipeline.settings import load_settings
from tests.settings_env import clean_env, config_error  # noqa: F401 - clean_env is an autouse fixture

KEY = "sk-test-0123456789"


def test_defaults():
    s = load_settings()
    assert s.embedder == "wordllama"
    assert s.static_model_path is None
    assert (s.openai_base_url, s.openai_model, s.openai_dimensions, s.openai_api_key) == (
        "https://api.openai.com/v1",
        None,
        None,
        None,
    )
    assert (s.openai_batch_size, s.openai_timeout_seconds, s.openai_max_retries, s.openai_encoding_format) == (
        32,
        60.0,
        2,
        "base64",
    )


def test_every_setting_is_read_from_the_environment(monkeypatch):
    for name, value in {
        "EMBEDDER": "openai",
        "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1",
        "OPENAI_MODEL": "nomic-embed-text",
        "OPENAI_DIMENSIONS": "256",
        "OPENAI_API_KEY": KEY,
        "OPENAI_BATCH_SIZE": "64",
        "OPENAI_TIMEOUT_SECONDS": "12.5",
        "OPENAI_MAX_RETRIES": "4",
        "OPENAI_ENCODING_FORMAT": "float",
    }.items():
        monkeypatch.setenv(f"INGEST_{name}", value)

    embedder = embedder_from_settings(load_settings())

    assert isinstance(embedder, OpenAIEmbedder)
    assert (
        embedder.base_url,
        embedder.model,
        embedder.dimensions,
        embedder.batch_size,
        embedder.timeout_seconds,
        embedder.max_retries,
        embedder.encoding_format,
    ) == ("http://127.0.0.1:11434/v1", "nomic-embed-text", 256, 64, 12.5, 4, "float")
    assert embedder.api_key.get_secret_value() == KEY


def test_the_key_falls_back_to_openai_api_key_and_the_prefixed_one_wins(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-conventional")
    assert load_settings().openai_api_key.get_secret_value() == "sk-conventional"
    monkeypatch.setenv("INGEST_OPENAI_API_KEY", KEY)
    assert load_settings().openai_api_key.get_secret_value() == KEY


def test_the_key_is_never_shown(monkeypatch):
    monkeypatch.setenv("INGEST_OPENAI_API_KEY", KEY)
    settings = load_settings()
    assert KEY not in repr(settings) and KEY not in str(settings.model_dump())


def test_openai_without_a_model_stops_at_start(monkeypatch):
    assert config_error(embedder="openai") == (
        "bad settings: INGEST_OPENAI_MODEL must be set when INGEST_EMBEDDER=openai (the embedding model's name, "
        "e.g. text-embedding-3-small)"
    )
    monkeypatch.setenv("INGEST_OPENAI_MODEL", "  ")  # blank is unset
    assert config_error(embedder="openai").startswith("bad settings: INGEST_OPENAI_MODEL must be set")


@pytest.mark.parametrize("url", ["localhost:11434/v1", "ftp://example.com/v1", "http://", "not a url"])
def test_a_base_url_that_is_not_http_is_named_and_not_echoed(monkeypatch, url):
    monkeypatch.setenv("INGEST_OPENAI_BASE_URL", url)
    message = config_error()
    assert message == (
        "bad setting INGEST_OPENAI_BASE_URL: not an http(s) URL (expected e.g. "
        "https://api.openai.com/v1 or http://127.0.0.1:11434/v1)"
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OPENAI_DIMENSIONS", "0"),
        ("OPENAI_DIMENSIONS", "-3"),
        ("OPENAI_BATCH_SIZE", "0"),
        ("OPENAI_TIMEOUT_SECONDS", "0"),
        ("OPENAI_MAX_RETRIES", "-1"),
        ("EMBEDDER", "bert"),
        ("OPENAI_ENCODING_FORMAT", "binary"),
    ],
)
def test_out_of_range_values_name_the_setting(monkeypatch, name, value):
    monkeypatch.setenv(f"INGEST_{name}", value)
    assert config_error().startswith(f"bad setting INGEST_{name}: ")


def test_a_bad_direct_database_url_is_not_echoed_either():
    message = config_error(direct_database_url="postgresql://app:s3cret@db.example/app?bogus=1")
    assert message.startswith("bad setting INGEST_DIRECT_DATABASE_URL: not a PostgreSQL connection URL")
    assert "s3cret" not in message


def test_ingest_work_with_openai_and_no_model_fails_in_one_line_before_touching_the_database(capsys):
    # An unreachable database URL: the embedder's configuration is refused before any connection.
    code = ingest(["work", "--drain", "--embedder", "openai", "--database-url", "postgresql://nobody@127.0.0.1:9/x"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        "ingest: error: bad settings: INGEST_OPENAI_MODEL must be set when INGEST_EMBEDDER=openai "
        "(the embedding model's name, e.g. text-embedding-3-small)\n"
    )


def test_ingest_work_with_a_bad_environment_fails_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("INGEST_EMBEDDER", "openai")
    monkeypatch.setenv("INGEST_OPENAI_MODEL", "m")
    monkeypatch.setenv("INGEST_OPENAI_DIMENSIONS", "0")
    assert ingest(["work", "--drain"]) == 1
    assert capsys.readouterr().err.startswith("ingest: error: bad setting INGEST_OPENAI_DIMENSIONS: ")


def test_the_dagster_resource_uses_the_settings_embedder_unless_it_names_one(monkeypatch):
    monkeypatch.setenv("INGEST_OPENAI_MODEL", "m")
    settings = load_settings(embedder="openai")
    assert isinstance(ProcessingResource().make_embedder(settings), OpenAIEmbedder)
    assert isinstance(ProcessingResource(embedder="hash").make_embedder(settings), HashEmbedder)
    assert isinstance(ProcessingResource().make_embedder(load_settings()), StaticEmbedder)
    assert isinstance(ProcessingResource().make_embedder(load_settings(embedder="none")), NoEmbedder)
    with pytest.raises(ConfigError, match=r"^bad settings: INGEST_OPENAI_MODEL must be set"):
        ProcessingResource(embedder="openai").make_embedder(load_settings(openai_model=None))
