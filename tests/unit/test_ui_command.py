"""How `ingest ui` starts `dg dev` (issue 61): on the checkout's workspace file, in Dagster's
home (where the dagster.yaml Dagster finds is the one it uses, so it does not warn that the
checkout's "will not be used"), with the checkout's .env passed on and the data folder our
settings resolved, absolute, over a relative one in that .env."""

from __future__ import annotations

from pathlib import Path

from ingestion_pipeline.cli.dagster_ui import dev_command, dev_environment
from ingestion_pipeline.settings import load_settings


def test_dg_dev_is_named_the_checkouts_workspace_file(tmp_path):
    command = dev_command(Path("/venv/bin/dg"), tmp_path)
    assert command == ["/venv/bin/dg", "dev", "--workspace", str(tmp_path / "workspace.yaml")]


def test_the_checkouts_env_reaches_dagster_under_what_our_settings_resolved(tmp_path, monkeypatch):
    checkout, home = tmp_path / "checkout", tmp_path / "data" / "dagster"
    checkout.mkdir()
    (checkout / ".env").write_text("INGEST_DATA_DIR=relative-data\nDAGSTER_PG_URL=postgresql://dagster@db/dagster\n")
    monkeypatch.chdir(checkout)
    for name in ("INGEST_DATA_DIR", "DAGSTER_PG_URL", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings(database_url="postgresql://app@db/app")
    env = dev_environment(checkout, settings, home)
    assert env["DAGSTER_PG_URL"] == "postgresql://dagster@db/dagster"  # from the .env
    assert env["INGEST_DATA_DIR"] == str(checkout / "relative-data")  # resolved where `ingest` runs
    assert env["DATABASE_URL"] == "postgresql://app@db/app" and env["DAGSTER_HOME"] == str(home)


def test_without_an_env_file_the_environment_is_ours(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOMETHING_OF_OURS", "1")
    env = dev_environment(tmp_path, load_settings(database_url="postgresql://app@db/app"), tmp_path / "home")
    assert env["SOMETHING_OF_OURS"] == "1"
