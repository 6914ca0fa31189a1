"""Settings from the environment: defaults, the DATABASE_URL alias, one-line ConfigErrors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingestion_pipeline.settings import default_data_dir, legacy_data_dir, load_settings
from tests.settings_env import clean_env, config_error  # noqa: F401 - clean_env is an autouse fixture

SECRET_URL = "postgresql://app:s3cret@db.example:5432/app?bogus=1"  # unparseable: unknown parameter


def test_defaults(tmp_path, monkeypatch, user_data_home):
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.database_url is None
    # The user's data folder (platformdirs: $XDG_DATA_HOME/ingestion-pipeline on Linux; the
    # suite's own, tests/conftest.py), whatever the working folder
    assert s.data_dir == user_data_home / "ingestion-pipeline" and s.data_dir_is_default
    assert s.parse_processes == os.cpu_count()
    assert s.worker_concurrency == min(4 + 4 * s.parse_processes, 64)  # every child kept busy
    assert (s.pool_min_size, s.pool_max_size) == (1, max(10, s.worker_concurrency + 2))
    assert s.connect_timeout_seconds == 10
    assert s.claim_batch_size == 10
    assert s.heartbeat_interval_seconds == 30.0
    assert s.stale_after_seconds == 300
    assert s.max_attempts == 3
    assert s.max_file_bytes == 50 * 1024 * 1024


def test_parsing_in_threads_keeps_four_jobs_in_flight_and_an_explicit_value_wins(monkeypatch):
    assert (load_settings(parse_processes=0).worker_concurrency, load_settings(parse_processes=0).pool_max_size) == (
        4,
        10,
    )
    monkeypatch.setenv("INGEST_WORKER_CONCURRENCY", "3")
    assert load_settings(parse_processes=8).worker_concurrency == 3


def test_database_url_is_read_from_the_conventional_variable(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db.example/app")
    assert load_settings().database_url == "postgresql://app@db.example/app"


def test_database_url_is_read_from_the_prefixed_variable(monkeypatch):
    monkeypatch.setenv("INGEST_DATABASE_URL", "postgresql://app@db.example/app")
    assert load_settings().database_url == "postgresql://app@db.example/app"


def test_blank_database_url_means_embedded(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "  ")
    assert load_settings().database_url is None


def test_override_wins_over_environment(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://env@db.example/env")
    assert (
        load_settings(database_url="postgresql://flag@db.example/flag").database_url
        == "postgresql://flag@db.example/flag"
    )


def test_prefixed_variables_are_read(monkeypatch):
    monkeypatch.setenv("INGEST_POOL_MAX_SIZE", "20")
    monkeypatch.setenv("INGEST_DATA_DIR", "/srv/ingest")
    s = load_settings()
    assert s.pool_max_size == 20 and s.data_dir == Path("/srv/ingest") and not s.data_dir_is_default


def test_dot_env_file_in_working_directory_is_read(tmp_path):
    (tmp_path / ".env").write_text("INGEST_WORKER_CONCURRENCY=7\n")
    assert load_settings().worker_concurrency == 7


def test_non_integer_names_the_variable(monkeypatch):
    monkeypatch.setenv("INGEST_POOL_MAX_SIZE", "abc")
    message = config_error()
    assert "INGEST_POOL_MAX_SIZE" in message and "'abc'" in message


@pytest.mark.parametrize(
    "name, value",
    [
        ("INGEST_WORKER_CONCURRENCY", "0"),
        ("INGEST_WORKER_CONCURRENCY", "1000"),
        ("INGEST_STALE_AFTER_SECONDS", "1"),
        ("INGEST_HEARTBEAT_INTERVAL_SECONDS", "0"),
        ("INGEST_MAX_ATTEMPTS", "0"),
        ("INGEST_CONNECT_TIMEOUT_SECONDS", "0"),
    ],
)
def test_out_of_range_names_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert name in config_error()


def test_pool_min_above_max_is_refused():
    message = config_error(pool_min_size=5, pool_max_size=2)
    assert "INGEST_POOL_MIN_SIZE" in message and "INGEST_POOL_MAX_SIZE" in message


def test_pool_min_equal_to_max_is_fine():
    assert load_settings(pool_min_size=3, pool_max_size=3).pool_max_size == 3


def test_heartbeat_must_fit_three_times_in_the_stale_window(monkeypatch):
    monkeypatch.setenv("INGEST_HEARTBEAT_INTERVAL_SECONDS", "200")
    monkeypatch.setenv("INGEST_STALE_AFTER_SECONDS", "300")
    assert "INGEST_HEARTBEAT_INTERVAL_SECONDS" in config_error()
    monkeypatch.setenv("INGEST_HEARTBEAT_INTERVAL_SECONDS", "100")
    assert load_settings().heartbeat_interval_seconds == 100


def test_bad_database_url_override_is_named_and_not_echoed():
    message = config_error(database_url=SECRET_URL)
    assert "DATABASE_URL" in message and "INGEST_DATABASE_URL" not in message
    assert "s3cret" not in message and SECRET_URL not in message


@pytest.mark.parametrize("variable", ["DATABASE_URL", "INGEST_DATABASE_URL"])
def test_bad_database_url_from_environment_is_named_and_not_echoed(monkeypatch, variable):
    monkeypatch.setenv(variable, SECRET_URL)
    message = config_error()
    assert "s3cret" not in message and SECRET_URL not in message
    assert "DATABASE_URL" in message and "INGEST_DATABASE_URL" not in message


def test_every_folder_shares_the_user_data_folder(tmp_path, monkeypatch, user_data_home):
    """`ingest` used to start a new embedded server in each folder with no `.ingest` above it."""
    for folder in (tmp_path / "a", tmp_path / "b" / "deep"):
        folder.mkdir(parents=True)
        monkeypatch.chdir(folder)
        assert load_settings().data_dir == default_data_dir() == user_data_home / "ingestion-pipeline"
    assert not any(tmp_path.rglob(".ingest"))


def test_a_per_folder_database_of_an_earlier_release_is_found_but_not_used(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / ".ingest" / "pgdata").mkdir(parents=True)
    (project / "docs" / "deep").mkdir(parents=True)
    monkeypatch.chdir(project / "docs" / "deep")
    assert legacy_data_dir() == (project / ".ingest").resolve()
    assert load_settings().data_dir == default_data_dir()
    monkeypatch.setenv("INGEST_DATA_DIR", str(project / ".ingest"))  # how to keep using it
    assert load_settings().data_dir == project / ".ingest"
    assert legacy_data_dir(tmp_path) is None


def test_chunk_size_and_overlap_default_to_1200_and_150_and_are_read_from_the_environment(monkeypatch):
    s = load_settings()
    assert (s.chunk_chars, s.chunk_overlap_chars) == (1200, 150)
    monkeypatch.setenv("INGEST_CHUNK_CHARS", "600")
    monkeypatch.setenv("INGEST_CHUNK_OVERLAP_CHARS", "0")
    s = load_settings()
    assert (s.chunk_chars, s.chunk_overlap_chars) == (600, 0)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"chunk_chars": 99}, "bad setting INGEST_CHUNK_CHARS: Input should be greater than or equal to 100"),
        ({"chunk_chars": 10_001}, "bad setting INGEST_CHUNK_CHARS: Input should be less than or equal to 10000"),
        ({"chunk_overlap_chars": -1}, "bad setting INGEST_CHUNK_OVERLAP_CHARS: Input should be greater than"),
        (
            {"chunk_chars": 400, "chunk_overlap_chars": 200},
            "INGEST_CHUNK_OVERLAP_CHARS (200) must be less than half of INGEST_CHUNK_CHARS (400)",
        ),
    ],
)
def test_a_chunk_setting_out_of_bounds_is_one_line_naming_it(overrides, expected):
    assert expected in config_error(**overrides)
