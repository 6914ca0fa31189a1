"""Document processing: bytes -> pages -> sections -> chunks (+ optional embeddings).

Pure Python on bytes in memory: no database and no Dagster here, so the worker decides
what to store and when, and everything below is testable in milliseconds.

    parse(content, name, max_bytes=...)   -> ParsedDocument (title, pages, sections)
    chunk_sections(sections, options)     -> list[Chunk]
    process_document(...)                 -> both, with embeddings when asked

A ProcessingError is permanent (its message is for the uploader); the worker should not
retry it.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

# Each name is imported from its module when first asked for (`__getattr__`): `ingest search`
# needs the embedders, not the parsers nor OCR (which imports numpy).
_LAZY: dict[str, str] = {
    "chunk_sections": "chunking",
    "chunking_from_settings": "chunking",
    "SUPPORTED_TYPES": "detect",
    "detect_type": "detect",
    "format_name": "detect",
    "Embedder": "embedding",
    "EmbedderRecord": "embedding",
    "HashEmbedder": "embedding",
    "NoEmbedder": "embedding",
    "embed_chunks": "embedding",
    "embedder_choices": "embedding",
    "embedder_from_settings": "embedding",
    "embedder_record": "embedding",
    "embedder_setting": "embedding",
    "EmbeddingRejected": "errors",
    "EmbeddingUnavailable": "errors",
    "ProcessingError": "errors",
    "heading_paths": "headings",
    "Chunk": "model",
    "ChunkingOptions": "model",
    "Page": "model",
    "ParsedDocument": "model",
    "Section": "model",
    "DEFAULT_OCR": "ocr",
    "OcrOptions": "ocr",
    "ocr_from_settings": "ocr",
    "parse": "parse",
    "process_document": "pipeline",
    "decode_text": "text",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """`parse` names the function, as when this module imported it eagerly: importing the
    submodule `.parse` (which the import system binds here by its name) leaves it alone."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
