"""Optional embeddings for chunks. Only local, dependency-free embedders live here: a real
model can be added later behind the same Embedder protocol."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import replace
from typing import Protocol

from .model import Chunk

_TOKEN = re.compile(r"\w+")
_BATCH = 256  # texts per embed() call: bounds memory (and request size for remote models)


class Embedder(Protocol):
    name: str
    dimensions: int | None

    def embed(self, texts: list[str]) -> list[list[float]] | None:
        """One vector per text, in order; None means "this embedder stores no vectors"."""
        ...


class NoEmbedder:
    """The default: chunks are searched by full text only."""

    name = "none"
    dimensions: int | None = None

    def embed(self, texts: list[str]) -> list[list[float]] | None:
        return None


class HashEmbedder:
    """Hashed bag of words: deterministic across processes and machines (blake2b, not
    Python's salted hash()), no model files, no network. For tests and demos: texts that
    share words get similar vectors, nothing more."""

    name = "hash"

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


_EMBEDDERS = {"none": NoEmbedder, "hash": HashEmbedder}


def get_embedder(name: str) -> Embedder:
    factory = _EMBEDDERS.get(name.strip().lower())
    if factory is None:
        choices = ", ".join(sorted(_EMBEDDERS))
        raise ValueError(f"unknown embedder {name!r}; choose one of: {choices}")
    return factory()


def embed_chunks(chunks: list[Chunk], embedder: Embedder) -> list[Chunk]:
    """The chunks with `embedding` filled in; unchanged when the embedder returns None."""
    embedded: list[Chunk] = []
    for at in range(0, len(chunks), _BATCH):
        batch = chunks[at:at + _BATCH]
        vectors = embedder.embed([chunk.text for chunk in batch])
        if vectors is None:
            return list(chunks)
        if len(vectors) != len(batch):
            raise ValueError(
                f"embedder {embedder.name!r} returned {len(vectors)} vectors for {len(batch)} texts"
            )
        embedded.extend(replace(c, embedding=[float(x) for x in v]) for c, v in zip(batch, vectors))
    return embedded
