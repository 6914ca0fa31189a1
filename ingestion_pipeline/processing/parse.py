"""bytes -> ParsedDocument: the checks every upload goes through, then the format parser."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from .detect import sniff
from .errors import ProcessingError
from .html import parse_html
from .markdown import parse_markdown
from .model import ParsedDocument
from .ooxml import DOCX, PPTX, XLSX, open_package
from .pdf import parse_pdf
from .plain import parse_plain
from .slides import parse_pptx
from .spreadsheet import parse_xlsx
from .word import parse_docx

_TEXT_PARSERS: dict[str, Callable[[str], ParsedDocument]] = {
    "text/plain": parse_plain,
    "text/markdown": parse_markdown,
    "text/html": parse_html,
}
_OFFICE_PARSERS: dict[str, tuple[str, Callable[[IO[bytes]], ParsedDocument]]] = {
    DOCX: ("DOCX", parse_docx),
    XLSX: ("XLSX", parse_xlsx),
    PPTX: ("PPTX", parse_pptx),
}
_NO_TEXT = {
    "application/pdf": "no text could be extracted (scanned PDF without a text layer?)",
    "text/html": "no text could be extracted (the page has only markup, scripts or styles)",
}
_WHITESPACE = b" \t\r\n\f\v"
_MB = 1024 * 1024


def parse(content: bytes, source_name: str, *, max_bytes: int) -> ParsedDocument:
    """Parse an upload, or raise ProcessingError with a message for the uploader."""
    _check_size(len(content), max_bytes)
    if not content:
        raise ProcessingError("file is empty")
    if not content.strip(_WHITESPACE):
        raise ProcessingError("file is empty: it contains only whitespace")
    mime_type, text = sniff(content, source_name)
    if mime_type in _OFFICE_PARSERS:
        document = _parse_office(content, mime_type, max_bytes)
    elif text is None:
        document = parse_pdf(content)
    elif not text.replace("\ufeff", "").strip():  # a byte-order mark (or two) and spaces
        raise ProcessingError("file is empty: it contains only whitespace")
    else:
        document = _TEXT_PARSERS[mime_type](text)
    if not document.sections:
        raise ProcessingError(_NO_TEXT.get(mime_type, "no text could be extracted"))
    return document


def _parse_office(content: bytes, mime_type: str, max_bytes: int) -> ParsedDocument:
    """An Office file through its library; whatever a damaged one makes the library raise
    becomes one line (memory running out is the parsing child's limit, left to it)."""
    kind, parser = _OFFICE_PARSERS[mime_type]
    stream = open_package(content, max_bytes)
    try:
        return parser(stream)
    except (ProcessingError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - the libraries raise KeyError, ValueError, XMLSyntaxError, …
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ProcessingError(f"damaged {kind} file: {detail}") from None


def _check_size(size: int, max_bytes: int) -> None:
    # Checked before anything reads the bytes: parsing a huge file is the cost we refuse.
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    if size <= max_bytes:
        return
    actual, limit = _size(size), _size(max_bytes)
    if actual == limit:  # 50.0 MB over a 50.0 MB limit reads as a bug; be exact
        actual, limit = f"{size:,} bytes", f"{max_bytes:,}-byte"
    raise ProcessingError(f"file is {actual}, over the {limit} limit")


def _size(n: int) -> str:
    if n >= _MB:
        return f"{n / _MB:.1f} MB"
    if n >= 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n} bytes"
