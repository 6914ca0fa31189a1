"""Artifact rows in COPY's text format, built where the document was parsed.

A parsing child returns its pages, sections and chunks as three COPY payloads instead of
lists of objects: the worker then neither unpickles sixty objects per document nor formats
their rows under its interpreter lock (that was most of its cost per document, measured in
bench/results/ingest_corpus.md, "After the children return COPY-ready rows"); it prefixes
each row with the two ids it learns only later (the document's and the generation's) and
sends the bytes.

Text format: columns separated by tabs, rows by newlines, NULL as \\N, and backslash,
tab, newline and carriage return escaped (PostgreSQL's COPY ... FROM STDIN, text format).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

NULL = "\\N"


def copy_text(value: object) -> str:
    """One value as a COPY text field: str, int, None, or a list of floats (real[])."""
    if value is None:
        return NULL
    if isinstance(value, str):
        # Four C-level passes: str.translate with a table is ten times slower on long text.
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    if isinstance(value, (list, tuple)):  # an embedding: real[] literal, no quoting needed
        return "{" + _vector_format(len(value)) % tuple(value) + "}"
    return str(value)


@functools.cache
def _vector_format(length: int) -> str:
    """One C-level format for a whole vector. Nine significant digits: exactly what a real
    (float4, the column's and pgvector's type) needs to come back bit for bit; a third
    fewer bytes than repr's seventeen, and formatting three times faster (3.3 -> 1.1 ms for
    a job's 23 vectors of 256 numbers)."""
    return ",".join(["%.9g"] * length)


def encode_rows(rows: Iterable[Sequence[object]]) -> bytes:
    """Rows without a trailing newline; empty when there are none."""
    return "\n".join("\t".join(copy_text(v) for v in row) for row in rows).encode("utf-8")


def with_leading_columns(payload: bytes, *values: object) -> bytes:
    """`payload`'s rows with `values` as their first columns, ready for COPY. Newlines only
    separate rows (a newline in a value is escaped), so one replace prefixes them all."""
    if not payload:
        return b""
    prefix = "".join(copy_text(v) + "\t" for v in values).encode("utf-8")
    return prefix + payload.replace(b"\n", b"\n" + prefix) + b"\n"
