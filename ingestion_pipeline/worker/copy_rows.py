"""Artifact rows in COPY's formats, built where the document was parsed: pages and sections
in text, chunks (with their vectors) in binary.

A parsing child returns its pages, sections and chunks as three COPY payloads instead of
lists of objects: the worker then neither unpickles sixty objects per document nor formats
their rows under its interpreter lock (that was most of its cost per document, measured in
bench/results/ingest_corpus.md, "After the children return COPY-ready rows"); it prefixes
each row with the two ids it learns only later (the document's and the generation's) and
sends the bytes.

Text format (pages and sections): columns separated by tabs, rows by newlines, NULL as \\N, and backslash,
tab, newline and carriage return escaped (PostgreSQL's COPY ... FROM STDIN, text format).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ingestion_pipeline.processing.model import Vector

NULL = "\\N"


def copy_text(value: object) -> str:
    """One value as a COPY text field: str, int or None (vectors go in binary rows)."""
    if value is None:
        return NULL
    if isinstance(value, str):
        # Four C-level passes: str.translate with a table is ten times slower on long text.
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return str(value)


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


# -- chunks: COPY's binary format ----------------------------------------------------------
#
# A chunk row carries its vector, and in text a vector is 256 decimal numbers that the child
# formats and the server parses back (measured, bench/results/ingest_corpus.md "The default
# embedder's drain": the server's COPY of a corpus's chunks took 3.1 s of CPU through the
# real[] column and its trigger, 2.3 s as binary straight into pgvector's column, about what
# the same rows cost without vectors). Binary: each tuple a 16-bit field count, then each
# field as a 32-bit length (-1: NULL) and its bytes, all big-endian.

BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
BINARY_TRAILER = b"\xff\xff"
_NULL_FIELD = b"\xff\xff\xff\xff"
_FLOAT4_OID = 700  # an array's element type, which the server checks against the column's


def binary_field(value: object) -> bytes:
    """One field: None, int (int4), str (text) or UUID (uuid)."""
    if value is None:
        return _NULL_FIELD
    if isinstance(value, bool):
        raise TypeError("a boolean has no field here")
    if isinstance(value, int):
        return struct.pack(">ii", 4, value)
    if isinstance(value, str):
        data = value.encode("utf-8")
        return struct.pack(">i", len(data)) + data
    if isinstance(value, UUID):
        return b"\x00\x00\x00\x10" + value.bytes
    raise TypeError(f"no binary COPY field for {type(value).__name__}")


def vector_field(vector: Vector | None, *, pgvector: bool) -> bytes:
    """A vector as pgvector's `vector` (dimensions, then float4s) or as `real[]` (an array
    header, then each float4 with its length). A float32 numpy row (the static models')
    becomes bytes as it is; a list of floats is packed."""
    if vector is None:
        return _NULL_FIELD
    size = len(vector)
    header = _vector_header(size) if pgvector else _array_header(size)
    if not isinstance(vector, list):
        return header + _array_values(vector, size, pgvector=pgvector)
    if pgvector:
        return header + struct.pack(f">{size}f", *vector)
    lengths_and_values: list[float] = [4, 0.0] * size  # int4 length 4 before every element
    lengths_and_values[1::2] = vector
    return header + _element_format(size).pack(*lengths_and_values)


def _vector_header(size: int) -> bytes:
    """pgvector's binary `vector`: the field's length, then its dimensions and an unused int2."""
    return struct.pack(">ihh", 4 + 4 * size, size, 0)


def _array_header(size: int) -> bytes:
    """A one-dimensional `real[]`: the field's length, 1 dimension, no nulls, float4's OID, the
    size and the lower bound 1."""
    return struct.pack(">iiiiii", 20 + 8 * size, 1, 0, _FLOAT4_OID, size, 1)


def _array_values(vector: NDArray[np.float32], size: int, *, pgvector: bool) -> bytes:
    import numpy as np

    if pgvector:
        return np.asarray(vector, dtype=">f4").tobytes()
    elements = np.empty(size, dtype=[("length", ">i4"), ("value", ">f4")])  # int4 length 4 before every element
    elements["length"] = 4
    elements["value"] = vector
    return elements.tobytes()


@functools.cache
def _element_format(size: int) -> struct.Struct:
    return struct.Struct(">" + "if" * size)


def binary_row(values: Iterable[object], vector: bytes) -> bytes:
    """A tuple's fields without its field count and its leading ids (`with_leading_fields`),
    the vector last."""
    return b"".join(binary_field(v) for v in values) + vector


def with_leading_fields(rows: Sequence[bytes], fields: int, *values: object) -> bytes:
    """A whole binary COPY stream: `rows` (each `fields` fields) with `values` as their
    first fields; empty when there are no rows."""
    if not rows:
        return b""
    prefix = struct.pack(">h", fields + len(values)) + b"".join(binary_field(v) for v in values)
    return BINARY_HEADER + b"".join(prefix + row for row in rows) + BINARY_TRAILER
