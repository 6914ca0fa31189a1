"""Dagster's home for `ingest ui` and `ingest demo`: <INGEST_DATA_DIR>/dagster, kept from one
session to the next.

Without DAGSTER_HOME, `dg dev` makes a temporary home in the folder it runs in (the checkout:
`.tmp_dagster_home_*`) and removes it only when it exits by itself; a stop that has to kill it
leaves the folder behind. Dagster reads the instance's configuration from the home and from
nowhere else once DAGSTER_HOME is set, and so does `dg`'s own telemetry switch, so the
checkout's dagster.yaml is copied into the home at every start: the checkout stays the one
place to edit it."""

from __future__ import annotations

import os
from pathlib import Path

HOME_NAME = "dagster"
CONFIG_NAME = "dagster.yaml"
HEADER = "# Copied from {source} by `ingest ui` / `ingest demo` at each start: edit that file, not this one.\n"


def dagster_home(data_dir: Path) -> Path:
    return data_dir.resolve() / HOME_NAME


def write_home(checkout: Path, data_dir: Path) -> Path:
    """The home with the checkout's dagster.yaml in it. Written whole and renamed into place:
    two commands starting at once (one data folder serves every checkout) never leave a
    half-written file for Dagster to read."""
    home = dagster_home(data_dir)
    home.mkdir(parents=True, exist_ok=True)
    source = checkout.resolve() / CONFIG_NAME
    partial = home / f".{CONFIG_NAME}.{os.getpid()}"
    partial.write_text(HEADER.format(source=source) + source.read_text())
    partial.replace(home / CONFIG_NAME)
    return home
