"""Embedders (none, hash; openai in tests/embedding/), embed_chunks, and process_document end to end."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ingestion_pipeline.errors import ConfigError
from ingestion_pipeline.processing import (
    Chunk,
    ChunkingOptions,
    HashEmbedder,
    NoEmbedder,
    ProcessingError,
    embed_chunks,
    embedder_from_settings,
    process_document,
)
from ingestion_pipeline.settings import load_settings
from tests.fixtures.pdf import make_pdf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MAX = 10 * 1024 * 1024


def chunk(ordinal: int, text: str) -> Chunk:
    return Chunk(ordinal, 0, 0, text, len(text.split()))


def test_hash_embedder_is_deterministic_normalised_and_sized():
    embedder = HashEmbedder()
    assert (embedder.name, embedder.dimensions) == ("hash", 64)
    texts = ["the pelican eats fish", "walrus migration north", "the pelican eats fish"]
    first, second = embedder.embed(texts), HashEmbedder().embed(texts)
    assert first == second
    assert first[0] == first[2]
    for vector in first:
        assert len(vector) == 64
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0)


def test_hash_embedder_similar_texts_are_closer():
    embedder = HashEmbedder(dimensions=256)
    a, b, c = embedder.embed(["pelican fish bay pouch", "pelican fish bay wings", "walrus ice clams"])
    dot = lambda u, v: sum(x * y for x, y in zip(u, v, strict=True))  # noqa: E731
    assert dot(a, b) > dot(a, c)


# Pinned once from the implementation (blake2b, 8-byte digest, big-endian; bit 0 the
# sign, the rest modulo the size the slot). A salted hash() or another digest moves them.
PELICAN_8 = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0]
PELICAN_SENTENCE_64 = {23: -0.5, 30: -0.5, 41: 0.5, 47: -0.5}  # the nonzero slots
PELICAN_SENTENCE_8 = [0.0, 1 / math.sqrt(6), 0.0, 0.0, 0.0, 0.0, -1 / math.sqrt(6), -2 / math.sqrt(6)]


def test_hash_embedder_known_vector_is_stable_across_runs():
    # blake2b, not Python's per-process salted hash(): this pins the algorithm.
    vector = HashEmbedder(dimensions=8).embed(["pelican"])[0]
    assert vector == PELICAN_8
    assert vector == HashEmbedder(dimensions=8).embed(["PELICAN!"])[0]
    sentence = HashEmbedder().embed(["the pelican eats fish"])[0]
    assert {i: round(x, 6) for i, x in enumerate(sentence) if x} == PELICAN_SENTENCE_64
    assert HashEmbedder(dimensions=8).embed(["the pelican eats fish"])[0] == pytest.approx(
        PELICAN_SENTENCE_8, abs=1e-12
    )


@pytest.mark.parametrize("hash_seed", ["0", "1", "4242"])
def test_hash_embedder_vector_does_not_depend_on_the_interpreter_hash_seed(hash_seed):
    """A fresh interpreter with another PYTHONHASHSEED (str hashes differ) gives the pinned
    vector."""
    import json
    import os
    import subprocess
    import sys

    program = (
        "import json, sys; from ingestion_pipeline.processing import HashEmbedder; "
        "print(json.dumps([hash('pelican'), HashEmbedder().embed(['the pelican eats fish'])[0]]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", program],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    str_hash, vector = json.loads(out.stdout)
    assert str_hash != hash("pelican") or hash_seed == os.environ.get("PYTHONHASHSEED")  # the salt did change
    assert vector == HashEmbedder().embed(["the pelican eats fish"])[0]
    assert {i: round(x, 6) for i, x in enumerate(vector) if x} == PELICAN_SENTENCE_64


def test_hash_embedder_custom_dimensions_and_empty_text():
    assert HashEmbedder(dimensions=3).embed([""]) == [[0.0, 0.0, 0.0]]
    with pytest.raises(ValueError):
        HashEmbedder(dimensions=0)


def test_no_embedder():
    embedder = NoEmbedder()
    assert (embedder.name, embedder.dimensions) == ("none", None)
    assert embedder.embed(["text"]) is None


def test_embedder_from_settings():
    settings = load_settings(embedder="none")
    assert isinstance(embedder_from_settings(settings), NoEmbedder)
    assert isinstance(embedder_from_settings(load_settings(embedder="hash")), HashEmbedder)
    assert isinstance(embedder_from_settings(settings, " Hash "), HashEmbedder)  # `ingest work --embedder`


def test_embedder_from_settings_unknown_lists_the_choices():
    with pytest.raises(
        ConfigError,
        match=r"^bad setting INGEST_EMBEDDER: unknown embedder 'bert'; "
        r"choose one of: hash, none, openai, static, wordllama$",
    ):
        embedder_from_settings(load_settings(embedder="none"), "bert")


def test_embed_chunks_fills_embeddings():
    chunks = [chunk(i, f"text number {i}") for i in range(300)]  # more than one batch
    embedded = embed_chunks(chunks, HashEmbedder(dimensions=16))
    assert [c.ordinal for c in embedded] == list(range(300))
    assert all(c.embedding is not None and len(c.embedding) == 16 for c in embedded)
    assert [c.text for c in embedded] == [c.text for c in chunks]
    assert all(c.embedding is None for c in chunks)  # inputs are frozen and untouched


def test_embed_chunks_with_no_embedder_leaves_chunks_unchanged():
    chunks = [chunk(0, "a"), chunk(1, "b")]
    assert embed_chunks(chunks, NoEmbedder()) == chunks
    assert embed_chunks([], HashEmbedder()) == []


def test_embed_chunks_rejects_a_wrong_vector_count():
    class Broken:
        name = "broken"
        dimensions = 2

        def embed(self, texts):
            return [[0.0, 1.0]]

    with pytest.raises(ValueError, match=r"returned 1 vectors for 2 texts"):
        embed_chunks([chunk(0, "a"), chunk(1, "b")], Broken())


@pytest.mark.parametrize(
    ("name", "content", "phrase"),
    [
        ("sample.txt", (FIXTURES / "sample.txt").read_bytes(), "the quick brown fox of plaintext"),
        ("sample.md", (FIXTURES / "sample.md").read_bytes(), "markdown walrus migration"),
        ("sample.html", (FIXTURES / "sample.html").read_bytes(), "html heron habitat"),
        (
            "pelican.pdf",
            make_pdf(["Portable pelican document", "More pages."], "Pelicans"),
            "portable pelican document",
        ),
    ],
)
def test_process_document_end_to_end(name, content, phrase):
    document, chunks = process_document(
        content, name, max_bytes=MAX, options=ChunkingOptions(200, 40), embedder=HashEmbedder()
    )
    assert chunks and [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert any(phrase in " ".join(c.text.lower().split()) for c in chunks)
    sections = {s.ordinal: s for s in document.sections}
    pages = {p.ordinal for p in document.pages}
    for c in chunks:
        assert c.section_ordinal in sections and c.page_ordinal in pages
        assert c.page_ordinal == sections[c.section_ordinal].page_ordinal
        assert c.embedding is not None and len(c.embedding) == 64


def test_process_document_without_embedder():
    _, chunks = process_document(b"Some text.", "a.txt", max_bytes=MAX)
    assert [(c.text, c.token_count, c.embedding) for c in chunks] == [("Some text.", 2, None)]


def test_process_document_raises_processing_error():
    with pytest.raises(ProcessingError, match=r"^file is empty$"):
        process_document(b"", "a.txt", max_bytes=MAX)
