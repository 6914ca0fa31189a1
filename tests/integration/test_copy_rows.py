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
