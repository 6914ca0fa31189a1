"""A query that cannot be embedded is one clear line, not a traceback (vector and hybrid)."""

import re

import pytest

from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing.errors import EmbeddingRejected, EmbeddingUnavailable
from ingestion_pipeline.search import search


class FailingEmbedder:
    name, dimensions = "failing", 8

    def __init__(self, error: Exception):
        self.error = error

    def embed(self, texts):
        raise self.error


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
@pytest.mark.parametrize(
    "error",
    [
        EmbeddingRejected("the embedding endpoint rejected the API key (401): check INGEST_OPENAI_API_KEY"),
        EmbeddingUnavailable("the embedding endpoint did not answer in 60 s"),
    ],
)
def test_embedding_errors_become_one_line(conn, mode, error):
    with pytest.raises(IngestError, match=re.escape(f"could not embed the query: {error}")):
        search(conn, "vacuum", mode=mode, embedder=FailingEmbedder(error))
