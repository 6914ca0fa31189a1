"""What the worker embeds for a chunk: its document's title and heading path, then its text
(processing.embedding.embedding_texts), so a chunk that does not name its subject is still
near questions about it."""

from __future__ import annotations

from ingestion_pipeline.processing import HashEmbedder, embed_chunks, parse
from ingestion_pipeline.processing.chunking import chunk_sections
from ingestion_pipeline.processing.embedding import embedding_texts

PAGE = b"""<!DOCTYPE html><html><head><title>Frequently asked questions</title></head><body>
<h1>Installing</h1><p>Use the package manager of your system.</p>
<h2>On Debian</h2><p>Run apt install with the package name.</p>
</body></html>"""


def test_each_chunk_is_embedded_under_its_title_and_heading_path():
    document = parse(PAGE, "faq.html", max_bytes=1 << 20)
    chunks = chunk_sections(document.sections)
    texts = embedding_texts(chunks, document)
    debian = next(t for t, c in zip(texts, chunks, strict=True) if "apt install" in c.text)
    assert debian.startswith("Frequently asked questions\nInstalling › On Debian\n")
    assert debian.endswith(next(c.text for c in chunks if "apt install" in c.text))
    # without the document (a caller that has none): the text alone, as before
    assert embedding_texts(chunks, None) == [c.text for c in chunks]


def test_the_vectors_are_those_of_the_texts_with_their_headings():
    document = parse(PAGE, "faq.html", max_bytes=1 << 20)
    chunks = chunk_sections(document.sections)
    embedder = HashEmbedder(32)
    embedded = embed_chunks(chunks, embedder, document)
    assert [c.embedding for c in embedded] == embedder.embed(embedding_texts(chunks, document))
    assert [c.embedding for c in embedded] != embedder.embed([c.text for c in chunks])
