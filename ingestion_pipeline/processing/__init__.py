"""Document processing: bytes -> pages -> sections -> chunks (+ optional embeddings).

Pure Python on bytes in memory: no database and no Dagster here, so the worker decides
what to store and when, and everything below is testable in milliseconds.

    parse(content, name, max_bytes=...)   -> ParsedDocument (title, pages, sections)
    chunk_sections(sections, options)     -> list[Chunk]
    process_document(...)                 -> both, with embeddings when asked

A ProcessingError is permanent (its message is for the uploader); the worker should not
retry it.
"""

from .chunking import chunk_sections, chunking_from_settings
from .detect import SUPPORTED_TYPES, detect_type, format_name
from .embedding import (
    Embedder,
    EmbedderRecord,
    HashEmbedder,
    NoEmbedder,
    embed_chunks,
    embedder_choices,
    embedder_from_settings,
    embedder_record,
    embedder_setting,
)
from .errors import EmbeddingRejected, EmbeddingUnavailable, ProcessingError
from .headings import heading_paths
from .model import Chunk, ChunkingOptions, Page, ParsedDocument, Section
from .ocr import DEFAULT_OCR, OcrOptions, ocr_from_settings
from .parse import parse
from .pipeline import process_document
from .text import decode_text

__all__ = [
    "DEFAULT_OCR",
    "SUPPORTED_TYPES",
    "Chunk",
    "ChunkingOptions",
    "Embedder",
    "EmbedderRecord",
    "EmbeddingRejected",
    "EmbeddingUnavailable",
    "HashEmbedder",
    "NoEmbedder",
    "OcrOptions",
    "Page",
    "ParsedDocument",
    "ProcessingError",
    "Section",
    "chunk_sections",
    "chunking_from_settings",
    "decode_text",
    "detect_type",
    "embed_chunks",
    "embedder_choices",
    "embedder_from_settings",
    "embedder_record",
    "embedder_setting",
    "format_name",
    "heading_paths",
    "ocr_from_settings",
    "parse",
    "process_document",
]
