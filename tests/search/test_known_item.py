"""A known item: a sentence of one long document, whose words every document has (issue 59's
PDF manuals). The default search finds its document by the words, though the vector list
prefers a document about the same things (migration 20261206001100: the lexical IDF over
chunks too, and a fusion that trusts the words when one document's passage leads)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.search import search
from ingestion_pipeline.settings import load_settings
from tests.vector.corpus import index_folder

FUSION = "passage_aware_fusion"
SENTENCE = "the quokka rode a zeppelin to deliver marzipan and obsidian to the harpsichord maker"
RARE = ["quokka", "zeppelin", "marzipan", "obsidian", "harpsichord"]
NEAR = (
    "kangaroo wallaby koala airship blimp balloon almond candy confection volcanic glass basalt piano clavichord organ"
)
FAR = "compiler parser token syntax lexer grammar optimizer bytecode register linker pawn rook gambit"
FILLER = "the a of and in with on for it is was that by from at as".split()


def paragraph(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) if rng.random() < 0.5 else rng.choice(FILLER) for _ in range(150))


def manual(seed: str, topic: str, sentence: bool) -> str:
    """30 paragraphs on `topic`; and the rare words three at a time in each, or all of them
    in the one sentence."""
    rng = random.Random(seed)
    paragraphs = [paragraph(rng, topic.split()) for _ in range(30)]
    if sentence:
        paragraphs[17] += f" {SENTENCE.capitalize()}."
    else:
        for i in range(30):  # three of them in every paragraph, each word in 18
            words = [RARE[(i + j) % len(RARE)] for j in range(3)]
            paragraphs[i] += f" The {words[0]} maker and a {words[1]} rode by some {words[2]}."
    return "\n\n".join(paragraphs)


def write_manuals(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "near-a.txt").write_text(manual("a", NEAR, sentence=False))
    (folder / "holder.txt").write_text(manual("b", FAR, sentence=True))
    (folder / "near-c.txt").write_text(manual("c", NEAR, sentence=False))
    return folder


@pytest.fixture(params=["head", "before"])
def schema_url(request, pg_server, templates, template_before):
    """Head, and the schema before the fusion: there the sentence's document is not first."""
    template = templates.head if request.param == "head" else template_before(FUSION)
    name = pg_server.spares().take(template)
    yield request.param, pg_server.url(name)
    pg_server.spares().drop_later(name)


def test_a_sentence_finds_the_one_document_that_holds_it(schema_url, tmp_path):
    schema, db_url = schema_url
    embedder = embedder_from_settings(load_settings(), "wordllama")  # the default model
    index_folder(db_url, write_manuals(tmp_path / "manuals"), embedder=embedder)
    query = "quokka rode zeppelin deliver marzipan obsidian harpsichord maker"
    with connect(db_url) as conn:
        vector = search(conn, query, mode="vector", limit=3, embedder=embedder)
        assert vector[0].source_name != "holder.txt"  # its mean is far from the query's words
        hits = search(conn, query, limit=3, embedder=embedder)  # the default mode: hybrid
        if schema == "before":  # the fixed share of the words lost to the document means
            assert hits[0].source_name != "holder.txt"
            return
        assert hits[0].source_name == "holder.txt"
        assert "[quokka]" in hits[0].snippet
