"""bytes -> ParsedDocument: the checks every upload goes through, then the format parser."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import IO, Any

from defusedxml import DefusedXmlException

from ingestion_pipeline.errors import printable

from .delimited import CSV, TSV, parse_delimited
from .detect import format_name, sniff
from .errors import ProcessingError
from .formats import EML, IMAGE_TYPES
from .model import ParsedDocument
from .ocr import DEFAULT_OCR, OcrOptions
from .packages import DOCX, EPUB, ODP, ODS, ODT, PPTX, XLSX, open_package
from .plain import parse_plain
from .rtf import RTF, parse_rtf

# The parsers whose libraries are heavy (BeautifulSoup, markdown-it, python-docx, openpyxl,
# python-pptx, pypdfium2, pypdf, Pillow, …: 0.6 s at every start of `ingest`, most of whose
# commands parse nothing) are imported when a file of their format first comes. A worker's
# fork server imports them all before it forks its parsing children: PARSER_MODULES, every
# module a `_parser` below loads from.
PARSER_MODULES: list[str] = []


def _parser(module: str, name: str) -> Callable[..., ParsedDocument]:
    path = f"{__package__}.{module}"
    if path not in PARSER_MODULES:
        PARSER_MODULES.append(path)

    def parse_with(*args: Any) -> ParsedDocument:
        found: Callable[..., ParsedDocument] = getattr(import_module(path), name)
        return found(*args)

    return parse_with


parse_markdown, parse_html = _parser("markdown", "parse_markdown"), _parser("html", "parse_html")
parse_docx, parse_xlsx = _parser("word", "parse_docx"), _parser("spreadsheet", "parse_xlsx")
parse_pptx, parse_opendocument = _parser("slides", "parse_pptx"), _parser("opendocument", "parse_opendocument")
parse_epub, parse_eml = _parser("epub", "parse_epub"), _parser("email_message", "parse_eml")
parse_image, parse_pdf = _parser("images", "parse_image"), _parser("pdf", "parse_pdf")

_TEXT_PARSERS: dict[str, Callable[[str], ParsedDocument]] = {
    "text/plain": parse_plain,
    "text/markdown": parse_markdown,
    "text/html": parse_html,
    CSV: lambda text: parse_delimited(text, CSV),
    TSV: lambda text: parse_delimited(text, TSV),
    RTF: parse_rtf,
}
# ZIP packages: the parser of the package's stream.
_PACKAGE_PARSERS: dict[str, Callable[[IO[bytes]], ParsedDocument]] = {
    DOCX: parse_docx,
    XLSX: parse_xlsx,
    PPTX: parse_pptx,
    ODT: lambda stream: parse_opendocument(stream, ODT),
    ODS: lambda stream: parse_opendocument(stream, ODS),
    ODP: lambda stream: parse_opendocument(stream, ODP),
    EPUB: parse_epub,
}
_NO_TEXT = {
    "application/pdf": "no text could be extracted (scanned PDF without a text layer?)",
    "text/html": "no text could be extracted (the page has only markup, scripts or styles)",
}
_WHITESPACE = b" \t\r\n\f\v"
_MB = 1024 * 1024


def parse(content: bytes, source_name: str, *, max_bytes: int, ocr: OcrOptions = DEFAULT_OCR) -> ParsedDocument:
    """Parse an upload, or raise ProcessingError with a message for the uploader."""
    _check_size(len(content), max_bytes)
    if not content:
        raise ProcessingError("file is empty")
    if not content.strip(_WHITESPACE):
        raise ProcessingError("file is empty: it contains only whitespace")
    mime_type, text = sniff(content, source_name)
    if text is not None and not text.replace("\ufeff", "").strip():  # a byte-order mark (or two) and spaces
        raise ProcessingError("file is empty: it contains only whitespace")
    try:
        document = _parse_as(mime_type, content, text, max_bytes, ocr)
        if not document.sections:
            reason = _NO_TEXT.get(mime_type, "no text could be extracted")
            raise ProcessingError("; ".join((reason, *document.notes)))
    except ProcessingError as exc:
        exc.mime_type = mime_type
        raise
    return document


def _parse_as(mime_type: str, content: bytes, text: str | None, max_bytes: int, ocr: OcrOptions) -> ParsedDocument:
    if text is not None:
        return _TEXT_PARSERS[mime_type](text)
    if mime_type in _PACKAGE_PARSERS:
        return _parse_package(content, mime_type, max_bytes)
    if mime_type in IMAGE_TYPES:
        return parse_image(content, mime_type, ocr)
    if mime_type == EML:
        return _library_errors(format_name(EML), lambda: parse_eml(content, _attachment_parser(max_bytes, ocr)))
    return parse_pdf(content, ocr)


def _attachment_parser(max_bytes: int, ocr: OcrOptions) -> Callable[[bytes, str], ParsedDocument]:
    """An attachment is parsed as an upload of its own, under the same limits."""
    return lambda content, name: parse(content, name, max_bytes=max_bytes, ocr=ocr)


def _parse_package(content: bytes, mime_type: str, max_bytes: int) -> ParsedDocument:
    kind, parser = format_name(mime_type), _PACKAGE_PARSERS[mime_type]
    stream = open_package(content, max_bytes, kind)
    return _library_errors(kind, lambda: parser(stream))


def _library_errors(kind: str, parse_it: Callable[[], ParsedDocument]) -> ParsedDocument:
    """Whatever a damaged file makes a library raise becomes one line (memory running out
    is the parsing child's limit, left to it)."""
    try:
        return parse_it()
    except (ProcessingError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - the libraries raise KeyError, ValueError, ParseError, …
        if _entity_refusal(exc):
            raise ProcessingError(
                f"refused {kind} file: its XML declares entities or a DTD (an entity bomb?)"
            ) from None
        detail = printable(str(exc), 200) or type(exc).__name__  # its words, not the file's bytes
        raise ProcessingError(f"damaged {kind} file: {detail}") from None


def _entity_refusal(exc: BaseException | None) -> bool:
    """defusedxml refused an entity or DTD, or lxml stopped an expansion, anywhere in the
    chain: openpyxl wraps defusedxml's refusal in a ValueError of its own."""
    while exc is not None:
        if isinstance(exc, DefusedXmlException) or "entity amplification" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False


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
