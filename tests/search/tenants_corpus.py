"""A reader's own collections and another tenant's data, for the non-interference tests
(test_non_interference.py: lexical budgets and plans; test_vector_non_interference.py: the
vector path past pgvector's scan limits). Alice reads `r1` (a member) and `r2` (public); the
anonymous reader reads `r2`. Pages are random sentences over one small vocabulary, so every
query matches many of them."""

from __future__ import annotations

import json
import random
from pathlib import Path
from uuid import UUID

import psycopg

from tests.old_enqueue import index_files
from tests.reads import rows_read
from tests.vector.corpus import EMBEDDER

ALICE = UUID("00000000-0000-4000-8000-00000000a11c")
VOCABULARY = [
    "granite", "harbour", "lantern", "meadow", "orchard", "pebble", "quarry", "saddle", "thistle", "walrus",
    "beacon", "cobalt", "dune", "ember", "fjord", "glacier", "heron", "juniper", "kelp", "lichen",
]  # fmt: skip
MODES = ("lexical", "vector", "hybrid")


def page(rng: random.Random, title: str, sections: int) -> str:
    parts = [f"# {title}\n\n"]
    for n in range(sections):
        words = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(6, 14)))
        parts.append(f"## {rng.choice(VOCABULARY).title()} {n}\n\nThe {words} by the shore.\n\n")
    return "".join(parts)


def index(url: str, folder: Path, files: dict[str, str], collection: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    _, drained = index_files(url, [folder], collection=collection, embedder=EMBEDDER)
    assert drained.counts["failed"] == 0, drained.counts


def queries(rng: random.Random, count: int) -> list[str]:
    made = []
    for n in range(count):
        words = rng.sample(VOCABULARY, rng.randint(1, 3))
        if n % 4 == 1:
            words.append(f'"{rng.choice(VOCABULARY)} {rng.choice(VOCABULARY)}"')
        if n % 4 == 2:
            words.append(f"-{rng.choice(VOCABULARY)}")
        made.append(" ".join(words))
    return made


def act_as(conn: psycopg.Connection, reader: UUID | None) -> None:
    """As PostgREST runs a request, for this transaction: anon, or `reader` signed in."""
    if reader is None:
        conn.execute("select set_config('role', 'anon', true)")
        conn.execute("select set_config('request.jwt.claims', '{\"role\": \"anon\"}', true)")
    else:
        conn.execute("select set_config('role', 'authenticated', true)")
        conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps({"sub": str(reader)}),))


def answer(
    conn: psycopg.Connection,
    text: str,
    mode: str,
    scope: list[str] | None,
    reader: UUID | None = ALICE,
    *,
    settings: dict[str, str] | None = None,
    model: bool = True,
) -> tuple[list, dict]:
    """The reader's hits (without the document ids' randomness: by source key) and the rows
    read. `settings`: set for the call's transaction first (pgvector's scan limits);
    `model`: pass the query's model (the search RPC since migration
    …_vector_search_in_scope_and_model.sql), else the five-argument call before it."""
    vector = None if mode == "lexical" else EMBEDDER.embed([text])[0]
    embedder = ", %s" if model else ""
    params = (text, scope, mode, vector) + (("hash",) if model else ())
    with conn.transaction():
        for name, value in (settings or {}).items():
            conn.execute("select set_config(%s, %s, true)", (name, value))
        before = rows_read(conn)
        act_as(conn, reader)
        hits = conn.execute(
            "select source_uri, heading, chunk_ordinal, snippet, round(score::numeric, 9) as score "
            f"from search_documents(%s, %s, %s, 10, %s::real[]{embedder})",
            params,
        ).fetchall()
        conn.execute("reset role")
        return [tuple(hit.values()) for hit in hits], rows_read(conn, since=before)
