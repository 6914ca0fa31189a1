"""Embeddings for chunks, chosen by INGEST_EMBEDDER (`embedder_from_settings`): `wordllama`
(the default: a static model shipped inside a package, offline; processing/static_embedder.py),
`static` (such a model from a folder), `openai` (any OpenAI-compatible endpoint,
processing/openai_embedder.py), `hash` (dependency-free, for tests) and `none`."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ingestion_pipeline.errors import ConfigError

from .headings import heading_paths
from .model import Chunk, ParsedDocument, Vector

if TYPE_CHECKING:
    from ingestion_pipeline.settings import Settings

_TOKEN = re.compile(r"\w+")
_BATCH = 256  # texts per embed() call unless the embedder says (`batch_size`): bounds memory


class Embedder(Protocol):
    """Optional attributes, read with getattr: `runs_in_child` (default True: the worker may
    embed in its parsing children, under their time limit; False for an embedder that waits
    on the network), `batch_size` (texts per embed() call), `child_modules` (modules the
    worker's fork server imports once for every parsing child), `embed_array(texts)` (the
    vectors of embed() as one float32 numpy array, a row per text: embed_chunks then keeps
    each chunk's row as it is, no list of Python floats), and what the index records of it
    (`embedder_record`): `model_id` (default: `name`) and `version`."""

    name: str
    dimensions: int | None

    def embed(self, texts: list[str]) -> list[list[float]] | None:
        """One vector per text, in order; None means "this embedder stores no vectors"."""
        ...


class NoEmbedder:
    """The default: chunks are searched by full text only."""

    name = "none"
    dimensions: int | None = None
    runs_in_child = True

    def embed(self, texts: list[str]) -> list[list[float]] | None:
        return None


class HashEmbedder:
    """Hashed bag of words: deterministic across processes and machines (blake2b, not
    Python's salted hash()), no model files, no network. For tests and demos: texts that
    share words get similar vectors, nothing more."""

    name = "hash"
    runs_in_child = True  # pure CPU: the parsing children give it cores of their own

    def __init__(self, dimensions: int = 64) -> None:
        if dimensions < 1:
            raise ValueError(f"dimensions must be at least 1, got {dimensions}")
        self.dimensions: int | None = dimensions

    def embed(self, texts: list[str]) -> list[list[float]] | None:
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        size = self.dimensions or 1
        vector = [0.0] * size
        for token in _TOKEN.findall(text.lower()):
            digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
            # One bit picks the sign so that unrelated words cancel out instead of piling up.
            vector[(digest >> 1) % size] += 1.0 if digest & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector


def _openai(settings: Settings) -> Embedder:
    from .openai_embedder import OpenAIEmbedder  # the client library is imported only when used

    return OpenAIEmbedder.from_settings(settings)


def _wordllama(settings: Settings) -> Embedder:
    from .static_embedder import StaticEmbedder, wordllama_model

    return StaticEmbedder(wordllama_model())


def _static(settings: Settings) -> Embedder:
    from .static_embedder import StaticEmbedder, folder_model

    if not settings.static_model_path:
        raise ConfigError("bad settings: INGEST_STATIC_MODEL_PATH must be set when INGEST_EMBEDDER=static")
    return StaticEmbedder(folder_model(settings.static_model_path))


_EMBEDDERS: dict[str, Callable[[Settings], Embedder]] = {
    "none": lambda settings: NoEmbedder(),
    "hash": lambda settings: HashEmbedder(),
    "wordllama": _wordllama,
    "static": _static,
    "openai": _openai,
}


def embedder_choices() -> list[str]:
    """The INGEST_EMBEDDER values (and `ingest work --embedder` choices)."""
    return sorted(_EMBEDDERS)


def embedder_from_settings(settings: Settings, name: str | None = None) -> Embedder:
    """The embedder INGEST_EMBEDDER names, or `name` (`ingest work --embedder`), configured
    from the settings. A bad choice or configuration raises ConfigError naming the setting."""
    chosen = (name or settings.embedder).strip().lower()
    factory = _EMBEDDERS.get(chosen)
    if factory is None:
        choices = ", ".join(sorted(_EMBEDDERS))
        raise ConfigError(f"bad setting INGEST_EMBEDDER: unknown embedder {chosen!r}; choose one of: {choices}")
    return factory(settings)


def embed_chunks(chunks: list[Chunk], embedder: Embedder, document: ParsedDocument | None = None) -> list[Chunk]:
    """The chunks with `embedding` filled in; unchanged when the embedder returns None. With
    the chunks' `document`, each is embedded with its document's title and its heading path
    before its text (`embedding_texts`)."""
    texts = embedding_texts(chunks, document)
    embedded: list[Chunk] = []
    size = getattr(embedder, "batch_size", _BATCH)
    as_array = getattr(embedder, "embed_array", None)
    for at in range(0, len(chunks), size):
        batch = chunks[at : at + size]
        vectors: Sequence[Vector] | None
        if callable(as_array):  # float32 rows, kept as they are (worker/copy_rows.py writes their bytes)
            vectors = list(as_array(texts[at : at + size]))
        else:
            listed = embedder.embed(texts[at : at + size])
            vectors = None if listed is None else [list(map(float, v)) for v in listed]
        if vectors is None:
            return list(chunks)
        if len(vectors) != len(batch):
            raise ValueError(f"embedder {embedder.name!r} returned {len(vectors)} vectors for {len(batch)} texts")
        embedded.extend(replace(c, embedding=v) for c, v in zip(batch, vectors, strict=True))
    return embedded


@dataclass(frozen=True)
class EmbedderRecord:
    """What an index generation records of the embedder that made its vectors (migration
    …_generations_record_their_embedder.sql): `dimensions` None means no vectors."""

    name: str
    dimensions: int | None = None
    version: str | None = None

    @property
    def makes_vectors(self) -> bool:
        return self.dimensions is not None and self.name != "none"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "dimensions": self.dimensions, "version": self.version}

    def describe(self) -> str:
        """e.g. `hash (64 dims)`, `none (no vectors)`."""
        return f"{self.name} ({self.dimensions} dims)" if self.makes_vectors else f"{self.name} (no vectors)"


def embedder_record(embedder: Embedder, *, with_version: bool = True) -> EmbedderRecord:
    """The record of `embedder` as a generation keeps it. `with_version=False` skips the
    version (a folder model's is the digest of its weights: slow to compute for a query)."""
    name = str(getattr(embedder, "model_id", None) or embedder.name)
    version = getattr(embedder, "version", None) if with_version else None
    dimensions = embedder.dimensions if name != "none" else None
    return EmbedderRecord(name, dimensions, str(version) if version is not None else None)


def embedder_setting(name: str | None) -> str | None:
    """The INGEST_EMBEDDER value that makes vectors named `name` (None when unknown)."""
    if not name:
        return None
    if name.startswith("wordllama"):
        return "wordllama"
    prefix = name.split(":", 1)[0]
    return prefix if prefix in _EMBEDDERS else None


def embedding_texts(chunks: list[Chunk], document: ParsedDocument | None) -> list[str]:
    """What is embedded for each chunk: the title and heading path, then the text. A chunk
    of a FAQ answer or a reference section often does not name its subject; its headings
    do (the question benchmark's vector MRR@10: 0.311 over the text alone, 0.344 with them;
    bench/results/question_quality.md)."""
    if document is None:
        return [chunk.text for chunk in chunks]
    headings = heading_paths(document.sections)
    texts = []
    for chunk in chunks:
        path = None if chunk.section_ordinal is None else headings.get(chunk.section_ordinal)
        texts.append("\n".join(part for part in (document.title, path, chunk.text) if part))
    return texts
