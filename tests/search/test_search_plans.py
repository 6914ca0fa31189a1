"""The search RPC never falls into the generic-plan trap (issue 33): a retrieval function
whose cached plan turns generic after five calls may stop using the text-search index and
read every chunk. Twenty calls with different queries and collections, as a reader and as
the owner, and each one's statements (auto_explain: the ones inside the RPC's functions too)
read candidates through the GIN index of searchable chunks, and chunks by primary key only.
The vector half (the HNSW index) is tests/vector/test_vector_search.py's."""

from __future__ import annotations

import json
import random
from uuid import UUID

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from tests.plans import captured_plans, scans_of

COLLECTIONS = ["north", "south", "east", "west"]
READER = UUID("00000000-0000-4000-8000-0000000000aa")  # reads north and east
DOCUMENTS_PER_COLLECTION = 75
PARAGRAPHS = 8  # 300 documents of several chunks each: the index is the way, not the documents
VOCABULARY = [f"{stem}{n}" for stem in ("lumen", "corvid", "basalt", "quorum", "fjord") for n in range(4000)]
CALLS = 20


def paragraph(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(60)) + "."


@pytest.fixture
def chunked(db_url, tmp_path) -> str:
    rng = random.Random(33)
    for collection in COLLECTIONS:
        folder = tmp_path / collection
        folder.mkdir()
        for n in range(DOCUMENTS_PER_COLLECTION):
            text = "\n\n".join(paragraph(rng) for _ in range(PARAGRAPHS))
            (folder / f"{collection}-{n}.md").write_text(f"# {collection} {n}\n\n{text}\n")
        assert ingest(["enqueue", str(folder), "--collection", collection, "--database-url", db_url]) == 0
    assert ingest(["work", "--drain", "--database-url", db_url]) == 0
    with connect(db_url) as conn:
        for collection in ("north", "east"):
            conn.execute("select grant_collection(%s, %s)", (collection, READER))
        # As autovacuum would have: the rows the workers wrote wait in the GIN index's pending
        # list until a vacuum merges them, and the planner prices a long pending list high.
        conn.execute("vacuum (analyze) document_chunks")
        conn.execute("analyze documents")
        assert conn.execute("select count(*) as n from document_chunks").fetchone()["n"] > 1000
    return db_url


def calls(rng: random.Random) -> list[tuple[str, list[str] | None]]:
    scopes = [None, ["north"], ["north", "south"], ["east", "west"], ["west"]]
    return [(" ".join(rng.sample(VOCABULARY, rng.randint(1, 3))), scopes[n % len(scopes)]) for n in range(CALLS)]


def test_twenty_calls_each_use_the_text_search_index(chunked):
    rng = random.Random(20)
    searched = 0
    with connect(chunked) as conn, captured_plans(conn) as plans:
        for reader in (True, False):  # as authenticated (row-level security), and as the owner
            for text, collections in calls(rng):
                plans.clear()
                with conn.transaction():
                    if reader:
                        conn.execute("select set_config('role', 'authenticated', true)")
                        claims = json.dumps({"sub": str(READER), "role": "authenticated"})
                        conn.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
                    hits = conn.execute(
                        "select collection from search_documents(%s, %s, 'lexical', 10)", (text, collections)
                    ).fetchall()
                candidates = scans_of(plans, "searchable_chunks")
                chunks = scans_of(plans, "document_chunks")
                # No chunk is read when no document of the scope has a term (the term counts say
                # so); otherwise the candidates come from the GIN index of the scope's committed
                # chunks, and the chunks of the best documents by their primary key.
                if not candidates:
                    assert not hits and not chunks, (text, collections)
                    continue
                searched += 1
                assert ("Bitmap Index Scan", "searchable_chunks_terms") in candidates, (text, collections, candidates)
                assert not any(kind == "Seq Scan" for kind, _ in candidates + chunks), (
                    text,
                    collections,
                    json.dumps(plans)[:3000],
                )
                allowed = set(collections or COLLECTIONS) & ({"north", "east"} if reader else set(COLLECTIONS))
                assert {hit["collection"] for hit in hits} <= allowed
    assert searched >= CALLS, searched  # most calls find their words: the test is not vacuous
