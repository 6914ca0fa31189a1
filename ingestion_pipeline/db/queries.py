"""Load named SQL from the package's `.sql` files (one place for SQL, not Python strings).

`query(name)` looks the name up in the application's query files: queries.sql (migrator,
documents), search.sql (the search RPC), reading.sql (documents as a reader reads them),
vector_search.sql (the vector path and its index) and one file per part of the RPC client
(leases, generations, acks, batches, documents, lifecycle, sources, collections, metrics).
A name defined twice, in one file or across them, is an error.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import LiteralString

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
QUERY_FILES = (
    "queries.sql",
    "search.sql",
    "reading.sql",
    "vector_search.sql",
    "leases.sql",
    "generations.sql",
    "acks.sql",
    "batches.sql",
    "documents.sql",
    "lifecycle.sql",
    "sources.sql",
    "collections.sql",
    "metrics.sql",
)


def sql_text(filename: str) -> str:
    return resources.files("ingestion_pipeline.db").joinpath("sql", filename).read_text("utf-8")


def named_statements(text: str, source: str) -> dict[str, str]:
    """The statements of a query file, by the name in the `-- name: x` line above each."""
    parts = _NAME.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    named: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in named:
            raise RuntimeError(f"query {name!r} is defined twice in {source}")
        named[name] = body.strip()
    return named


@cache
def _queries(filename: str) -> dict[str, str]:
    return named_statements(sql_text(filename), filename)


@cache
def _application_queries() -> dict[str, str]:
    merged: dict[str, str] = {}
    for filename in QUERY_FILES:
        for name, body in _queries(filename).items():
            if name in merged:
                raise RuntimeError(f"query {name!r} is defined in more than one of {', '.join(QUERY_FILES)}")
            merged[name] = body
    return merged


def query(name: str, filename: str | None = None) -> LiteralString:
    """The named statement. Typed `LiteralString`, the type psycopg's `execute` asks for: the
    text is the package's own (its .sql files), never built from input, so this is the one
    place a `str` becomes a query; values go in as parameters and identifiers through
    `psycopg.sql`. (mypy treats `LiteralString` as `str`, so no cast is needed here; a
    checker that tells them apart, such as pyright, would need one.)"""
    named = _queries(filename) if filename else _application_queries()
    try:
        return named[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in {filename or ', '.join(QUERY_FILES)}") from None
