"""The openai embedder against the local OpenAI-compatible server (real sockets): batching,
dimensions, the client's retries, transient and permanent errors, what it sends to a child."""

from __future__ import annotations

import base64
import math
import pickle

import pytest
from pydantic import SecretStr

from ingest_testing.openai_server import FIXED_MODEL, NATIVE_DIMENSIONS
from ingestion_pipeline.processing import (
    Chunk,
    EmbeddingRejected,
    EmbeddingUnavailable,
    HashEmbedder,
    ProcessingError,
    embed_chunks,
)
from ingestion_pipeline.processing.openai_embedder import _vector
from ingestion_pipeline.worker.errors import describe, is_transient
from ingestion_pipeline.worker.isolation import can_run_in_child


def texts(count: int) -> list[str]:
    return [f"lantern number {i} by the harbour" for i in range(count)]


def hashed(count: int, dimensions: int = NATIVE_DIMENSIONS) -> list:
    """What the server computes for texts(count), to float32 precision (base64 carries float32)."""
    return [pytest.approx(v, abs=1e-6) for v in HashEmbedder(dimensions).embed(texts(count))]


def one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message and message
    return message


@pytest.mark.parametrize(
    ("count", "batch_size", "sizes"), [(10, 4, [4, 4, 2]), (4, 4, [4]), (1, 32, [1]), (65, 32, [32, 32, 1])]
)
def test_n_texts_go_out_in_ceil_n_over_batch_requests_in_order(openai_server, make_embedder, count, batch_size, sizes):
    vectors = make_embedder(batch_size=batch_size).embed(texts(count))

    assert openai_server.batch_sizes == sizes and openai_server.requests == math.ceil(count / batch_size)
    assert openai_server.inputs == count
    assert vectors == hashed(count)  # each text's own vector, in order


def test_embed_chunks_sends_one_request_per_batch_of_chunks(openai_server, make_embedder):
    chunks = [Chunk(i, 0, 0, text, 5) for i, text in enumerate(texts(70))]

    embedded = embed_chunks(chunks, make_embedder(batch_size=32))

    assert openai_server.batch_sizes == [32, 32, 6]
    assert [c.embedding for c in embedded] == hashed(70)


def test_dimensions_are_sent_when_set_and_the_vectors_have_that_size(make_embedder):
    embedder = make_embedder(dimensions=8)
    assert [len(v) for v in embedder.embed(texts(3))] == [8, 8, 8]
    assert embedder.dimensions == 8


def test_without_dimensions_nothing_is_sent_and_the_size_is_learned(make_embedder):
    embedder = make_embedder(model=FIXED_MODEL)  # a model that refuses `dimensions`
    assert embedder.dimensions is None
    assert [len(v) for v in embedder.embed(texts(2))] == [NATIVE_DIMENSIONS] * 2
    assert embedder.dimensions == NATIVE_DIMENSIONS


@pytest.mark.parametrize(
    ("server_base64", "encoding_format"),
    [("yes", "base64"), ("ignore", "base64"), ("refuse", "float"), ("yes", "float")],
)
def test_vectors_arrive_as_base64_by_default_or_as_floats(openai_server, make_embedder, server_base64, encoding_format):
    openai_server.base64 = server_base64  # "ignore": a server that always sends floats
    vectors = make_embedder(encoding_format=encoding_format, dimensions=1536).embed(texts(3))
    assert vectors == hashed(3, 1536)
    if encoding_format == "float":  # JSON numbers: exactly the server's float64 values
        assert vectors == HashEmbedder(1536).embed(texts(3))


def test_a_server_that_refuses_base64_is_named_in_the_error(openai_server, make_embedder):
    openai_server.base64 = "refuse"
    with pytest.raises(EmbeddingRejected) as raised:
        make_embedder().embed(texts(1))
    assert one_line(raised.value) == (
        "the embedding endpoint rejected the request (400: unsupported "
        "encoding_format 'base64'): check INGEST_OPENAI_MODEL and "
        "INGEST_OPENAI_ENCODING_FORMAT"
    )


def test_the_clients_own_retries_absorb_429_and_500(openai_server, make_embedder):
    openai_server.fail_next(1, status=429)
    openai_server.fail_next(1, status=500)

    assert len(make_embedder(max_retries=2).embed(texts(2))) == 2
    assert openai_server.statuses == {429: 1, 500: 1, 200: 1}


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_after_the_retries_are_transient(openai_server, make_embedder, status):
    openai_server.fail_next(2, status=status)

    with pytest.raises(EmbeddingUnavailable) as raised:
        make_embedder(max_retries=1).embed(texts(1))

    assert not isinstance(raised.value, ProcessingError) and is_transient(raised.value)
    assert one_line(raised.value) == (
        f"the embedding endpoint answered {status} in 2 tries (INGEST_OPENAI_MAX_RETRIES=1): injected {status}"
    )
    assert openai_server.requests == 2


def test_a_stalled_endpoint_times_out_as_transient(openai_server, make_embedder):
    openai_server.stall_next(1, seconds=30)  # hangs up when the server stops

    with pytest.raises(EmbeddingUnavailable) as raised:
        make_embedder(timeout_seconds=0.3).embed(texts(1))

    assert is_transient(raised.value)
    assert one_line(raised.value) == (
        f"the embedding endpoint {openai_server.url} did not answer within 0.3 s "
        "(INGEST_OPENAI_TIMEOUT_SECONDS) in 1 try (INGEST_OPENAI_MAX_RETRIES=0)"
    )


def test_an_endpoint_that_refuses_connections_is_transient(make_embedder):
    embedder = make_embedder(base_url="http://127.0.0.1:9/v1")  # discard port: nothing listens

    with pytest.raises(
        EmbeddingUnavailable,
        match=r"^could not reach the embedding endpoint "
        r"http://127\.0\.0\.1:9/v1 in 1 try",
    ) as raised:
        embedder.embed(texts(1))
    one_line(raised.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"api_key": SecretStr("sk-wrong-key")},
            "the embedding endpoint rejected the API key (401): check INGEST_OPENAI_API_KEY",
        ),
        (
            {"api_key": None},
            "the embedding endpoint rejected the API key (401): check INGEST_OPENAI_API_KEY (none is set)",
        ),
        (
            {"model": "no-such-model"},
            "the embedding endpoint does not know model 'no-such-model' (404: The model `no-such-model` does not exist "
            "or you do not have access to it.): check INGEST_OPENAI_MODEL and INGEST_OPENAI_BASE_URL",
        ),
        (
            {"model": FIXED_MODEL, "dimensions": 8},
            "the embedding endpoint rejected the request (400: This model does not support specifying dimensions.): "
            "check INGEST_OPENAI_DIMENSIONS",
        ),
    ],
)
def test_a_bad_key_model_or_request_is_permanent_and_names_the_setting(
    openai_server, make_embedder, overrides, message
):
    with pytest.raises(EmbeddingRejected) as raised:
        make_embedder(max_retries=2, **overrides).embed(texts(1))

    assert isinstance(raised.value, ProcessingError) and not is_transient(raised.value)
    assert one_line(raised.value) == message
    assert openai_server.requests == 1  # the client does not retry a refusal either
    assert "sk-wrong-key" not in describe(raised.value)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            403,
            "the embedding endpoint refused the API key for model 'test-embedding' (403): check "
            "INGEST_OPENAI_API_KEY and INGEST_OPENAI_MODEL",
        ),
        (
            413,
            "the embedding endpoint refused a request of 3 texts as too large (413: injected 413): lower "
            "INGEST_OPENAI_BATCH_SIZE",
        ),
        (
            422,
            "the embedding endpoint rejected the request (422: injected 422): check INGEST_OPENAI_MODEL and "
            "INGEST_OPENAI_ENCODING_FORMAT",
        ),
        (405, "the embedding endpoint answered 405 (injected 405): check INGEST_OPENAI_BASE_URL"),
    ],
)
def test_other_refusals_are_permanent_too(openai_server, make_embedder, status, message):
    openai_server.fail_next(1, status=status)
    with pytest.raises(EmbeddingRejected) as raised:
        make_embedder(batch_size=32).embed(texts(3))
    assert one_line(raised.value) == message


def test_a_missing_vector_is_permanent(openai_server, make_embedder):
    openai_server.drop_vector_next()
    with pytest.raises(EmbeddingRejected) as raised:
        make_embedder().embed(texts(3))
    assert one_line(raised.value).startswith(
        "the embedding endpoint returned 2 vectors for 3 texts: check INGEST_OPENAI_BASE_URL"
    )


@pytest.mark.parametrize("dimensions", [None, 8])
def test_vectors_of_the_wrong_size_are_permanent(openai_server, make_embedder, dimensions):
    embedder = make_embedder(dimensions=dimensions)
    embedder.embed(texts(1))  # without INGEST_OPENAI_DIMENSIONS, the first answer sets the size
    openai_server.wrong_dimensions_next()

    with pytest.raises(EmbeddingRejected) as raised:
        embedder.embed(texts(2))

    expected = dimensions or NATIVE_DIMENSIONS
    assert one_line(raised.value) == (
        f"the embedding endpoint returned vectors of {expected + 1} dimensions, "
        f"expected {expected}: check INGEST_OPENAI_DIMENSIONS and INGEST_OPENAI_MODEL"
    )


def test_it_embeds_in_the_jobs_thread_and_pickles_without_its_client(openai_server, make_embedder):
    embedder = make_embedder(api_key=SecretStr("test-key"))
    embedder.embed(texts(1))  # the client exists now
    assert embedder._client is not None

    assert not can_run_in_child(embedder)
    assert can_run_in_child(HashEmbedder())  # local CPU work still goes to the children
    copy = pickle.loads(pickle.dumps(embedder))  # noqa: S301 - the bytes we just pickled
    assert copy._client is None
    assert copy.embed(texts(1)) == embedder.embed(texts(1))  # makes its own on first use


def test_its_repr_never_shows_the_key(make_embedder):
    embedder = make_embedder(api_key=SecretStr("sk-very-secret"))
    assert "sk-very-secret" not in repr(embedder) and "sk-very-secret" not in str(vars(embedder))


@pytest.mark.parametrize("garbled", ["not base64!", base64.b64encode(b"12345").decode()])
def test_a_vector_that_is_not_base64_float32_is_permanent(garbled):
    with pytest.raises(
        EmbeddingRejected,
        match=r"^the embedding endpoint sent a vector that is not base64 float32: "
        r"set INGEST_OPENAI_ENCODING_FORMAT=float$",
    ):
        _vector(garbled)
