"""Named SQL in ingestion_pipeline/db/sql/*.sql loads by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ingestion_pipeline
from ingestion_pipeline.db.queries import QUERY_FILES, query, sql_text

PACKAGE = Path(ingestion_pipeline.__file__).parent
NAMES = [
    name
    for filename in QUERY_FILES
    for name in re.findall(
        r"^--\s*name:\s*(\w+)\s*$", (PACKAGE / "db" / "sql" / filename).read_text("utf-8"), re.MULTILINE
    )
]


def code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.strip().startswith("--")]


def test_queries_file_defines_names():
    assert len(NAMES) >= 6
    assert len(NAMES) == len(set(NAMES)), "a query name is defined twice (in one file or across files)"


@pytest.mark.parametrize("name", NAMES)
def test_named_query_loads_as_one_statement(name):
    text = query(name)
    code = "\n".join(code_lines(text))
    assert code, f"query {name} has no SQL"
    assert "-- name:" not in text
    assert code.rstrip().endswith(";") and code.count(";") == 1, f"query {name} is not one statement"


def test_unknown_name_raises_key_error():
    with pytest.raises(KeyError, match="no_such_query"):
        query("no_such_query")


def test_names_used_by_the_package_exist():
    used = set()
    for source in PACKAGE.rglob("*.py"):
        text = source.read_text("utf-8")
        used |= set(re.findall(r"""query\(\s*["'](\w+)["']""", text))
        used |= set(re.findall(r"""["'](rpc_\w+)["']""", text))
    assert used, "found no query names in the package"
    assert sorted(used - set(NAMES)) == []


def test_ledger_sql_ships_with_the_package():
    assert "ingest_schema_migrations" in sql_text("ledger.sql")
