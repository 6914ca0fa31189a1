"""Load named SQL from the package's `.sql` files (one place for SQL, not Python strings)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def sql_text(filename: str) -> str:
    return resources.files("ingestion_pipeline.db").joinpath("sql", filename).read_text("utf-8")


@cache
def _queries(filename: str) -> dict[str, str]:
    text = sql_text(filename)
    parts = _NAME.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    named = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in named:
            raise RuntimeError(f"query {name!r} is defined twice in {filename}")
        named[name] = body.strip()
    return named


def query(name: str, filename: str = "queries.sql") -> str:
    try:
        return _queries(filename)[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in {filename}") from None
