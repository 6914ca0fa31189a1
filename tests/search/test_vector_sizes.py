"""One model's vectors of two sizes (migration 20261207000200): an embedder whose size is a
setting (OpenAI's `dimensions`) records the same model name at either size. Scans of the
chunks compare a query only with generations whose mean vector has the query's size (they no
longer test each chunk), so a query of either size finds its own documents, never the
other size's, and never fails with pgvector's "different vector dimensions" — on the exact
path over every chunk of the scope and on the path through the nearest means."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing.embedding import HashEmbedder
from ingestion_pipeline.search import search, search_passages
from tests.vector.corpus import index_folder

TEXT = "glacier heron fjord moraine"
PATHS = {"exact": None, "nearest means": "0"}  # ingest.vector_chunks_at_most


def write(folder: Path, prefix: str) -> Path:
    folder.mkdir()
    for n in range(3):
        body = f"The {TEXT} walk, day {n}: a {TEXT.split()[n]} at dawn.\n\nNothing else here but lunch."
        (folder / f"{prefix}{n}.md").write_text(f"# {prefix} {n}\n\n{body}\n")
    return folder


@pytest.fixture(scope="module")
def two_sizes(pg_server, templates, tmp_path_factory):
    """Documents a0-a2 embedded by `hash` at 64 dimensions, b0-b2 by `hash` at 32."""
    name = pg_server.spares().take(templates.head)
    url = pg_server.url(name)
    root = tmp_path_factory.mktemp("sizes")
    index_folder(url, write(root / "a", "a"), embedder=HashEmbedder(64))
    index_folder(url, write(root / "b", "b"), embedder=HashEmbedder(32))
    with connect(url) as conn:
        conn.execute("analyze")
    yield url
    pg_server.spares().drop_later(name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("size", "own"), [(64, "a"), (32, "b")])
def test_a_query_finds_only_the_vectors_of_its_size(two_sizes, path, size, own):
    embedder = HashEmbedder(size)
    with connect(two_sizes) as conn:
        if PATHS[path] is not None:
            conn.execute("select set_config('ingest.vector_chunks_at_most', %s, false)", (PATHS[path],))
        passages = search_passages(conn, TEXT, mode="vector", limit=10, embedder=embedder)
        hits = search(conn, TEXT, mode="vector", limit=10, embedder=embedder)
        hybrid = search_passages(conn, TEXT, mode="hybrid", limit=10, embedder=embedder)
    assert {p.source_name[0] for p in passages} == {own}, [p.source_name for p in passages]
    assert {h.source_name[0] for h in hits} == {own}, [h.source_name for h in hits]
    # hybrid: the other size's documents by their words only, never by a vector
    assert {p.source_name[0] for p in hybrid} == {"a", "b"}
