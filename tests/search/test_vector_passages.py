"""Vector passages from the chunks, not from the documents' means (issue 60, migration
20261207000100): the one paragraph of a long manual that is about the query is the first
passage in vector mode, though two dozen short notes that are partly about it have means
nearer the query than the manual's. Run with the default model (wordllama)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.search import search_passages
from ingestion_pipeline.settings import load_settings
from tests.vector.corpus import index_folder

MIGRATION = "passages_by_their_own_evidence"
TOPIC = "koala kangaroo wallaby eucalyptus marsupial wombat platypus echidna"
FAR = "compiler parser token syntax lexer grammar optimizer bytecode register linker"
OTHER = "kettle lantern rope harbour sail anchor oar tide mooring galley stove"
FILLER = "the a of and in with on for it is was that by from at as".split()
NOTES = 24  # more than the 20 documents a passage search took as candidates before


def paragraph(rng: random.Random, share: float, words: list[str], others: list[str]) -> str:
    """150 words: `share` of them from `words`, the rest from `others` or filler."""
    picked = []
    for _ in range(150):
        if rng.random() < share:
            picked.append(rng.choice(words))
        else:
            picked.append(rng.choice(others) if rng.random() < 0.5 else rng.choice(FILLER))
    return " ".join(picked)


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True)
    rng = random.Random(60)
    manual = [paragraph(rng, 0.5, FAR.split(), FAR.split()) for _ in range(30)]
    manual[17] = paragraph(rng, 0.9, TOPIC.split(), FILLER)  # the passage about the query
    (folder / "manual.txt").write_text("\n\n".join(manual))
    for n in range(NOTES):  # partly about the query, all of it in one chunk
        (folder / f"note-{n:02}.txt").write_text(paragraph(rng, 0.3, TOPIC.split(), OTHER.split()))
    return folder


@pytest.fixture(params=["head", "before"])
def schema_url(request, pg_server, templates, template_before):
    """Head, and the schema before vector passages came from the chunks."""
    template = templates.head if request.param == "head" else template_before(MIGRATION)
    name = pg_server.spares().take(template)
    yield request.param, pg_server.url(name)
    pg_server.spares().drop_later(name)


def test_vector_passages_find_the_paragraph_of_a_long_document(schema_url, tmp_path):
    schema, db_url = schema_url
    embedder = embedder_from_settings(load_settings(), "wordllama")  # the default model
    index_folder(db_url, write_corpus(tmp_path / "corpus"), embedder=embedder)
    with connect(db_url) as conn:
        passages = search_passages(conn, TOPIC, mode="vector", limit=5, embedder=embedder)
    names = [p.source_name for p in passages]
    if schema == "before":  # the manual's mean is below every note's: never a candidate
        assert "manual.txt" not in names
        return
    assert names[0] == "manual.txt", names
    assert "koala" in passages[0].content or "wombat" in passages[0].content
