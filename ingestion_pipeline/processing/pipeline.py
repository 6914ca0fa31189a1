"""The whole of processing in one call, as the worker uses it."""

from __future__ import annotations

from .chunking import chunk_sections
from .embedding import Embedder, embed_chunks
from .model import DEFAULT_CHUNKING, Chunk, ChunkingOptions, ParsedDocument
from .ocr import DEFAULT_OCR, OcrOptions
from .parse import parse


def process_document(
    content: bytes,
    source_name: str,
    *,
    max_bytes: int,
    options: ChunkingOptions = DEFAULT_CHUNKING,
    embedder: Embedder | None = None,
    ocr: OcrOptions = DEFAULT_OCR,
) -> tuple[ParsedDocument, list[Chunk]]:
    """Parse, chunk and (when an embedder is given) embed. Raises ProcessingError for a
    document that can never be processed; anything else is unexpected."""
    document = parse(content, source_name, max_bytes=max_bytes, ocr=ocr)
    chunks = chunk_sections(document.sections, options)
    if embedder is not None:
        chunks = embed_chunks(chunks, embedder, document)
    return document, chunks
