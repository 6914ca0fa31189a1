"""The values processing produces; they map one-to-one onto the artifact tables.

Ordinals are dense (0..n-1) within a document, and `page_ordinal` /
`section_ordinal` always refer to ordinals that exist in the same result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# A chunk's vector: a list of floats (what Embedder.embed returns), or a float32 numpy row
# (an embedder with `embed_array`, as the built-in static models: processing/embedding.py).
Vector: TypeAlias = "list[float] | NDArray[np.float32]"

MIN_CHUNK_CHARS = 100  # smaller chunks carry too little context to be worth a row


@dataclass(frozen=True)
class Page:
    ordinal: int
    text: str


@dataclass(frozen=True)
class Section:
    ordinal: int
    heading: str | None
    level: int  # 1-6 for headings; 1 for sections without a heading
    page_ordinal: int | None
    text: str  # starts with the heading line when there is a heading


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    section_ordinal: int | None
    page_ordinal: int | None
    text: str
    token_count: int  # whitespace-separated words: cheap, deterministic, model-free
    embedding: Vector | None = None


@dataclass(frozen=True)
class ParsedDocument:
    title: str | None
    mime_type: str
    pages: list[Page]
    sections: list[Section]
    # What the reader should know about how the document was read (OCR stopped early, an
    # attachment not indexed): kept in the document's metadata.
    notes: tuple[str, ...] = ()
    # Each page's label where the format names pages otherwise than 1, 2, 3 (a PDF's "iv",
    # "A-1"), by ordinal; empty when page numbers are the names.
    page_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChunkingOptions:
    max_chars: int = 1200
    overlap_chars: int = 150

    def __post_init__(self) -> None:
        # Checked here so a bad setting fails when it is read, not deep inside a job.
        if self.max_chars < MIN_CHUNK_CHARS:
            raise ValueError(f"max_chars must be at least {MIN_CHUNK_CHARS}, got {self.max_chars}")
        if not 0 <= self.overlap_chars < self.max_chars:
            raise ValueError(
                f"overlap_chars must be at least 0 and less than max_chars ({self.max_chars}), got {self.overlap_chars}"
            )


DEFAULT_CHUNKING = ChunkingOptions()
