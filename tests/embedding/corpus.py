"""What the embedding tests share: a corpus of several chunks per document, and what the
database holds after a drain."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion_pipeline.processing import HashEmbedder
from tests.vector.corpus import embedded_text

WORDS = "lantern harbour keeper tide signal ledger otter kettle archive beacon".split()


def write_corpus(folder: Path, documents: int, paragraphs: int = 8) -> Path:
    """Markdown files of several chunks each (about 600 characters a paragraph)."""
    folder.mkdir()
    for number in range(documents):
        body = "\n\n".join(
            f"## Part {p}\n\n" + " ".join(f"{WORDS[(number + p + i) % len(WORDS)]} {i}" for i in range(90))
            for p in range(paragraphs)
        )
        (folder / f"doc-{number:02d}.md").write_text(f"# Document {number}\n\n{body}\n")
    return folder


def committed_chunks(conn) -> list[dict]:
    """Each committed chunk with its vector, wherever the schema keeps it: `embedding real[]`,
    or the pgvector column a trigger moves it into (migration pgvector, where the server has
    the extension)."""
    pgvector = conn.execute(
        "select 1 from information_schema.columns where table_schema = 'public' "
        "and table_name = 'document_chunks' and column_name = 'embedding_vector'"
    ).fetchone()
    vector = "coalesce(c.embedding, c.embedding_vector::real[])" if pgvector else "c.embedding"
    return conn.execute(
        f"select c.document_id, c.title, c.heading, c.content, {vector} as embedding "
        "from document_chunks c join documents d "
        "on d.id = c.document_id and d.index_generation_id = c.index_generation_id order by c.document_id, c.ordinal"
    ).fetchall()


def jobs(conn) -> list[dict]:
    return conn.execute(
        "select j.status, j.attempt_count, j.error_message, d.status as document_status "
        "from ingestion_jobs j join documents d on d.id = j.document_id"
    ).fetchall()


def embed_stage_errors(conn) -> list[str]:
    rows = conn.execute(
        "select detail->>'error' as error from ingestion_job_stages "
        "where stage = 'embed' and detail ? 'error' order by id"
    ).fetchall()
    return [row["error"] for row in rows]


def assert_every_document_indexed_with_vectors(conn, documents: int, dimensions: int) -> list[dict]:
    assert [(j["status"], j["document_status"]) for j in jobs(conn)] == [("completed", "indexed")] * documents
    chunks = committed_chunks(conn)
    assert len({c["document_id"] for c in chunks}) == documents
    # what the server computes, from what the worker sends: title, heading path and text
    expected = HashEmbedder(dimensions).embed([embedded_text(c) for c in chunks])
    for chunk, vector in zip(chunks, expected, strict=True):
        assert chunk["embedding"] == pytest.approx(vector, abs=1e-6)  # stored as real[]
    return chunks
