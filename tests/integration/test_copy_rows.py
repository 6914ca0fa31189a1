"""The COPY text rows a parsing child builds (worker/copy_rows.py) load back exactly, through
a real COPY: escapes, NULLs, unicode, embeddings, and the ids prefixed by the worker."""

from uuid import uuid4

import pytest

from ingestion_pipeline.worker.copy_rows import encode_rows, with_leading_columns

TRICKY = ["tab\there", "new\nline", "carriage\rreturn", "back\\slash \\N not null", "ünïcødé ✓ 𝄞", "", "\\t"]


def test_rows_load_back_exactly(conn):
    conn.execute("create temp table t (id uuid, n int, body text, maybe text, v real[])")
    rows = [(i, text, None if i % 2 else text, [0.5, -1.25, 3e-08] if i % 3 else None) for i, text in enumerate(TRICKY)]
    ident = uuid4()
    with conn.cursor() as cur, cur.copy("copy t (id, n, body, maybe, v) from stdin") as copy:
        copy.write(with_leading_columns(encode_rows(rows), ident))
    back = conn.execute("select id, n, body, maybe, v from t order by n").fetchall()
    assert [(r["n"], r["body"], r["maybe"], r["v"]) for r in back] == [
        (n, body, maybe, pytest.approx(v) if v else None) for n, body, maybe, v in rows
    ]
    assert {r["id"] for r in back} == {ident}


def test_no_rows_is_an_empty_copy():
    assert with_leading_columns(encode_rows([]), uuid4()) == b""


def test_float4_vectors_load_back_bit_for_bit(conn):
    """Nine significant digits: every float4 (the column's type, and pgvector's) survives."""
    import numpy as np

    bits = np.random.default_rng(7).integers(0, 2**32, 4096, dtype=np.uint32)
    values = bits.view(np.float32)
    values = values[np.isfinite(values)][:2048].reshape(8, 256)
    conn.execute("create temp table v (n int, v real[])")
    with conn.cursor() as cur, cur.copy("copy v (n, v) from stdin") as copy:
        copy.write(encode_rows((n, row.tolist()) for n, row in enumerate(values)) + b"\n")
    back = np.array([r["v"] for r in conn.execute("select v from v order by n").fetchall()], dtype=np.float32)
    assert back.view(np.uint32).tolist() == values.view(np.uint32).tolist()
