"""Synthetic migration folders for the migrator's tests (test_migrate.py,
test_rolling_upgrade.py), and what the migrator did with them.

Every synthetic migration inserts one row into `applied_effects`, so a test can count
how many times each file's SQL really ran (independently of the ledger)."""

from __future__ import annotations

from pathlib import Path

from ingestion_pipeline.db.connection import connect

V1, V2, V3 = "20260101000001", "20260101000002", "20260101000003"

EFFECTS_TABLE = "create table if not exists applied_effects (version text not null);\n"


def write(folder: Path, version: str, name: str, body: str = "") -> Path:
    """A migration that creates table `<name>` (unless `body` is given) and records its run."""
    body = body or f"create table {name} (id int primary key);\n"
    path = folder / f"{version}_{name}.sql"
    path.write_text(f"{EFFECTS_TABLE}{body}insert into applied_effects values ('{version}');\n")
    return path


def ledger(url: str) -> list[dict]:
    with connect(url) as conn:
        if not conn.execute("select to_regclass('public.ingest_schema_migrations') is not null as p").fetchone()["p"]:
            return []
        return conn.execute("select * from ingest_schema_migrations order by version").fetchall()


def versions(url: str) -> list[str]:
    return [row["version"] for row in ledger(url)]


def effects(url: str) -> list[str]:
    with connect(url) as conn:
        if not conn.execute("select to_regclass('public.applied_effects') is not null as p").fetchone()["p"]:
            return []
        return [r["version"] for r in conn.execute("select version from applied_effects order by version")]
