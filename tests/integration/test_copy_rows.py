"""The COPY rows a parsing child builds (worker/copy_rows.py) load back exactly, through a
real COPY: escapes, NULLs, unicode, the ids prefixed by the worker, and (binary) vectors."""

from uuid import uuid4

import pytest

from ingestion_pipeline.worker.copy_rows import encode_rows, with_leading_columns

TRICKY = ["tab\there", "new\nline", "carriage\rreturn", "back\\slash \\N not null", "ünïcødé ✓ 𝄞", "", "\\t"]


def test_rows_load_back_exactly(conn):
    conn.execute("create temp table t (id uuid, n int, body text, maybe text)")
    rows = [(i, text, None if i % 2 else text) for i, text in enumerate(TRICKY)]
    ident = uuid4()
    with conn.cursor() as cur, cur.copy("copy t (id, n, body, maybe) from stdin") as copy:
        copy.write(with_leading_columns(encode_rows(rows), ident))
    back = conn.execute("select id, n, body, maybe from t order by n").fetchall()
    assert [(r["n"], r["body"], r["maybe"]) for r in back] == rows
    assert {r["id"] for r in back} == {ident}


def test_no_rows_is_an_empty_copy():
    assert with_leading_columns(encode_rows([]), uuid4()) == b""


CHUNK_COLUMNS = "id uuid, g uuid, n int, s int, p int, body text, tokens int, title text, heading text"


def _chunk_rows() -> list[tuple]:
    import numpy as np

    vectors = np.random.default_rng(3).standard_normal((len(TRICKY), 5)).astype(np.float32)
    return [
        (
            n,
            None if n % 2 else n * 10,
            n if n % 3 else None,
            text,
            len(text),
            None if n % 4 == 1 else text,
            None,
            None if n == 2 else vectors[n] if n % 2 else vectors[n].tolist(),  # a float32 row, or a list
        )
        for n, text in enumerate(TRICKY)
    ]


@pytest.mark.parametrize("pgvector", [False, True], ids=["real[]", "pgvector"])
def test_binary_chunk_rows_load_back_exactly(conn, pgvector):
    """The chunks' binary rows (worker/copy_rows.py) through a real binary COPY: ints, NULLs,
    unicode and tricky text, the two leading ids, and vectors bit for bit, whether lists of
    floats (Embedder.embed) or float32 numpy rows (embed_array, the static models)."""
    import numpy as np

    from ingestion_pipeline.worker.copy_rows import binary_row, vector_field, with_leading_fields

    if pgvector:
        schema = conn.execute(
            "select n.nspname as s from pg_catalog.pg_type t join pg_catalog.pg_namespace n on n.oid = t.typnamespace"
            " where t.typname = 'vector'"
        ).fetchone()
        if schema is None:
            pytest.skip("pgvector is not installed in this database")
        vector_type = f'"{schema["s"]}".vector'
    else:
        vector_type = "real[]"
    conn.execute(f"create temp table t ({CHUNK_COLUMNS}, v {vector_type})")
    rows = _chunk_rows()
    encoded = [binary_row(r[:7], vector_field(r[7], pgvector=pgvector)) for r in rows]
    ident, generation = uuid4(), uuid4()
    with conn.cursor() as cur, cur.copy("copy t from stdin (format binary)") as copy:
        copy.write(with_leading_fields(encoded, 8, ident, generation))
    back = conn.execute(
        "select id, g, n, s, p, body, tokens, title, heading, v::real[] as v from t order by n"
    ).fetchall()
    assert {(r["id"], r["g"]) for r in back} == {(ident, generation)}
    assert [(r["n"], r["s"], r["p"], r["body"], r["tokens"], r["title"], r["heading"]) for r in back] == [
        r[:7] for r in rows
    ]
    for got, row in zip(back, rows, strict=True):
        expected = row[7]
        if expected is None:
            assert got["v"] is None
        else:
            assert np.array(got["v"], dtype=np.float32).tobytes() == np.array(expected, dtype=np.float32).tobytes()


def test_no_chunk_rows_is_an_empty_binary_copy():
    from ingestion_pipeline.worker.copy_rows import with_leading_fields

    assert with_leading_fields((), 8, uuid4(), uuid4()) == b""
