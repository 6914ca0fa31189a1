"""INGEST_EMBEDDER=openai: any endpoint that speaks the OpenAI embeddings API (OpenAI, Azure
OpenAI's v1 API, Ollama, text-embeddings-inference, vLLM), through the `openai` client.

Texts go out `batch_size` per request. The client retries 408/409/429/5xx, timeouts and
connection errors itself (INGEST_OPENAI_MAX_RETRIES, with its backoff); what is still
failing after that is EmbeddingUnavailable, and the queue retries the job later. A refusal
no retry changes (401/403 key, 404 model, 400/422 request) is EmbeddingRejected, a
ProcessingError: the job fails for good with one line naming the setting to fix.

It runs in the job's thread, never in a parsing child (`runs_in_child = False`): waiting on
the network needs no core of its own, and a slow endpoint must not count against the
parse timeout. The HTTP client is made on first use and left out of pickles.

Vectors come as base64 (little-endian float32) by default, as the official client asks
for them: decoding JSON floats costs the worker's process ~14x the CPU for a model's
1536 numbers (docs/embeddings.md). INGEST_OPENAI_ENCODING_FORMAT=float for a server that
refuses base64; a server that ignores it and sends floats is read as well.
"""

from __future__ import annotations

import array
import base64
import binascii
import sys
import threading
from typing import TYPE_CHECKING, Any, Literal, cast

import openai
from openai.types import Embedding
from pydantic import SecretStr

from ingestion_pipeline.errors import ConfigError

from .errors import EmbeddingRejected, EmbeddingUnavailable

if TYPE_CHECKING:
    from ingestion_pipeline.settings import Settings

# The client insists on a key; a local server without authentication ignores this one.
NO_KEY = "no-key-set"
MESSAGE_CHARS = 200  # of the server's own error message, in a job's one-line error
EncodingFormat = Literal["float", "base64"]  # how vectors come back (INGEST_OPENAI_ENCODING_FORMAT)


class OpenAIEmbedder:
    name = "openai"
    runs_in_child = False

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: SecretStr | None = None,
        dimensions: int | None = None,
        batch_size: int = 32,
        timeout_seconds: float = 60.0,
        max_retries: int = 2,
        encoding_format: EncodingFormat = "base64",
    ):
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        # Sent as `dimensions` only when asked for; otherwise learned from the first answer,
        # and every later answer must match it.
        self.requested_dimensions = dimensions
        self.dimensions: int | None = dimensions
        self.batch_size = batch_size
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.encoding_format = encoding_format
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIEmbedder:
        if not settings.openai_model:
            raise ConfigError(
                "bad settings: INGEST_OPENAI_MODEL must be set when INGEST_EMBEDDER=openai "
                "(the embedding model's name, e.g. text-embedding-3-small)"
            )
        return cls(
            model=settings.openai_model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            dimensions=settings.openai_dimensions,
            batch_size=settings.openai_batch_size,
            timeout_seconds=settings.openai_timeout_seconds,
            max_retries=settings.openai_max_retries,
            # the setting's pattern admits only these two
            encoding_format=cast(EncodingFormat, settings.openai_encoding_format),
        )

    @property
    def model_id(self) -> str:
        """The name an index generation records: the model's, not the protocol's."""
        return f"openai:{self.model}"

    def __repr__(self) -> str:  # never the key
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r}, dimensions={self.dimensions})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_client"], state["_lock"]  # sockets and locks do not travel
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _client=None, _lock=threading.Lock())

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for at in range(0, len(texts), self.batch_size):
            vectors.extend(self._request(texts[at : at + self.batch_size]))
        return vectors

    def _http(self) -> openai.OpenAI:
        with self._lock:  # the jobs' threads share one client (and its connection pool)
            if self._client is None:
                key = self.api_key.get_secret_value() if self.api_key else ""
                self._client = openai.OpenAI(
                    api_key=key or NO_KEY,
                    base_url=self.base_url,
                    timeout=self.timeout_seconds,
                    max_retries=self.max_retries,
                )
            return self._client

    def _request(self, texts: list[str]) -> list[list[float]]:
        options: dict[str, Any] = {"dimensions": self.requested_dimensions} if self.requested_dimensions else {}
        try:
            # Asked for explicitly, base64 comes back undecoded: _vector decodes it.
            response = self._http().embeddings.create(
                model=self.model, input=texts, encoding_format=self.encoding_format, **options
            )
        except openai.APIStatusError as exc:
            raise self._status_error(exc, len(texts)) from None
        except openai.APITimeoutError:
            raise EmbeddingUnavailable(
                f"the embedding endpoint {self.base_url} did not answer within {self.timeout_seconds:g} s "
                f"(INGEST_OPENAI_TIMEOUT_SECONDS) in {self._tries()}"
            ) from None
        except openai.APIConnectionError as exc:
            raise EmbeddingUnavailable(
                f"could not reach the embedding endpoint {self.base_url} in {self._tries()}: "
                f"{_one_line(str(exc.__cause__ or exc))}"
            ) from None
        return self._checked(sorted(response.data, key=lambda item: item.index), len(texts))

    def _checked(self, data: list[Embedding], expected: int) -> list[list[float]]:
        if len(data) != expected:
            raise EmbeddingRejected(
                f"the embedding endpoint returned {len(data)} vectors for {expected} texts: "
                "check INGEST_OPENAI_BASE_URL (is it an OpenAI-compatible embeddings API?)"
            )
        vectors = [_vector(item.embedding) for item in data]
        sizes = {len(v) for v in vectors}
        wanted = self.dimensions or next(iter(sizes))
        if sizes != {wanted} or wanted == 0:
            got = ", ".join(str(n) for n in sorted(sizes))
            raise EmbeddingRejected(
                f"the embedding endpoint returned vectors of {got} dimensions, expected "
                f"{wanted}: check INGEST_OPENAI_DIMENSIONS and INGEST_OPENAI_MODEL"
            )
        self.dimensions = wanted
        return vectors

    def _status_error(self, exc: openai.APIStatusError, texts: int) -> Exception:
        status, said = exc.status_code, _server_message(exc)
        if status == 401:
            unset = "" if self.api_key else " (none is set)"
            return EmbeddingRejected(
                f"the embedding endpoint rejected the API key (401): check INGEST_OPENAI_API_KEY{unset}"
            )
        if status == 403:
            return EmbeddingRejected(
                f"the embedding endpoint refused the API key for model {self.model!r} (403): "
                "check INGEST_OPENAI_API_KEY and INGEST_OPENAI_MODEL"
            )
        if status == 404:
            return EmbeddingRejected(
                f"the embedding endpoint does not know model {self.model!r} (404: {said}): "
                "check INGEST_OPENAI_MODEL and INGEST_OPENAI_BASE_URL"
            )
        if status == 413:
            return EmbeddingRejected(
                f"the embedding endpoint refused a request of {texts} texts as too "
                f"large (413: {said}): lower INGEST_OPENAI_BATCH_SIZE"
            )
        if status in (400, 422):
            if self.requested_dimensions:
                settings = "INGEST_OPENAI_DIMENSIONS"
            elif self.encoding_format == "base64":
                settings = "INGEST_OPENAI_MODEL and INGEST_OPENAI_ENCODING_FORMAT"
            else:
                settings = "INGEST_OPENAI_MODEL"
            return EmbeddingRejected(
                f"the embedding endpoint rejected the request ({status}: {said}): check {settings}"
            )
        if status in (408, 409, 429) or status >= 500:
            return EmbeddingUnavailable(f"the embedding endpoint answered {status} in {self._tries()}: {said}")
        return EmbeddingRejected(f"the embedding endpoint answered {status} ({said}): check INGEST_OPENAI_BASE_URL")

    def _tries(self) -> str:
        tries = self.max_retries + 1
        return f"{tries} tr{'y' if tries == 1 else 'ies'} (INGEST_OPENAI_MAX_RETRIES={self.max_retries})"


def _vector(embedding: str | list[float]) -> list[float]:
    """One vector: base64 of little-endian float32 (as asked), or a list of numbers (a
    server that ignores encoding_format)."""
    if not isinstance(embedding, str):
        return [float(x) for x in embedding]
    try:
        raw = base64.b64decode(embedding, validate=True)
    except binascii.Error:
        raw = None
    if raw is None or len(raw) % 4:
        raise EmbeddingRejected(
            "the embedding endpoint sent a vector that is not base64 float32: set INGEST_OPENAI_ENCODING_FORMAT=float"
        )
    numbers = array.array("f", raw)
    if sys.byteorder == "big":
        numbers.byteswap()
    return numbers.tolist()


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own words (`{"error": {"message": ...}}` or a plain body), on one line."""
    body = exc.body
    if isinstance(body, dict):
        body = body.get("message") or body.get("error") or body
    return _one_line(str(body if body else exc.message))


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 1] + "…"
