"""What kind of document the bytes are. Names are hints at most: the bytes decide."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from .errors import ProcessingError
from .ooxml import OOXML_TYPES, ooxml_type
from .text import decode_text

SUPPORTED_TYPES = ("text/plain", "text/markdown", "text/html", "application/pdf", *OOXML_TYPES)

_MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd"}
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
_TEXT_SUFFIXES = {".txt", ".text", ".csv", ".log"} | _MARKDOWN_SUFFIXES | _HTML_SUFFIXES
_LEADING_JUNK = b" \t\r\n\x00\xef\xbb\xbf"  # whitespace and a UTF-8 byte-order mark
_PDF_MAGIC = b"%PDF-"
_PDF_HEADER_WINDOW = 1024  # readers accept the header anywhere in the first 1 KB

# Magic numbers of formats people upload by mistake, to say what a refused file is.
_MAGIC = (
    (b"PK\x03\x04", "ZIP archive"),
    (b"PK\x05\x06", "ZIP archive"),
    (b"\x89PNG", "PNG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"II*\x00", "TIFF image"),
    (b"MM\x00*", "TIFF image"),
    (b"\x1f\x8b", "gzip archive"),
    (b"Rar!\x1a\x07", "RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "legacy Microsoft Office document"),
    (b"\x7fELF", "executable program"),
    (b"SQLite format 3\x00", "SQLite database"),
)
# A text file may legitimately start with "GIF89a", so a printable magic number only names
# a file that also fails to decode; the others refuse the file outright. RTF is text, but
# all markup: indexing it as plain text would be noise.
_RTF_MAGIC = b"{\\rtf"

_HTML_START = re.compile(
    r"\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>/]",
    re.IGNORECASE | re.DOTALL,
)


def detect_type(content: bytes, source_name: str) -> str:
    """One of SUPPORTED_TYPES, or ProcessingError saying what the file looks like."""
    return sniff(content, source_name)[0]


def sniff(content: bytes, source_name: str) -> tuple[str, str | None]:
    """The type and, for text types, the decoded text (so parse decodes only once); None
    for a binary type (PDF, DOCX, XLSX, PPTX)."""
    if not content:
        raise ProcessingError("file is empty")
    suffix = _suffix(source_name)
    if _is_pdf(content, suffix):
        return "application/pdf", None
    if content.startswith(b"PK\x03\x04"):
        office = ooxml_type(content)
        if office is not None:
            return office, None
    label, final = _magic(content)
    if suffix == ".pdf":
        looks = f"; it looks like {_with_article(label)}" if label else ""
        raise ProcessingError(f"not a PDF: {source_name} does not start with %PDF-{looks}")
    if content.startswith(_RTF_MAGIC):
        raise _refused("looks like an RTF document", source_name)
    if final:
        raise _refused(f"looks like binary data ({label})", source_name)
    try:
        text = decode_text(content)
    except ProcessingError as exc:
        what = f"looks like binary data ({label})" if label else str(exc)
        raise _refused(what, source_name) from None
    return _text_type(text, suffix), text


def _text_type(text: str, suffix: str) -> str:
    if _HTML_START.match(text[:4096].lstrip("\ufeff")) or suffix in _HTML_SUFFIXES:
        return "text/html"
    if suffix in _MARKDOWN_SUFFIXES:
        return "text/markdown"
    return "text/plain"


def _is_pdf(content: bytes, suffix: str) -> bool:
    if content[:_PDF_HEADER_WINDOW].lstrip(_LEADING_JUNK).startswith(_PDF_MAGIC):
        return True
    # Some generators put junk before the header; accept that only when the name agrees,
    # so a text file that merely mentions "%PDF-" is not taken for a PDF.
    return suffix == ".pdf" and _PDF_MAGIC in content[:_PDF_HEADER_WINDOW]


def _magic(content: bytes) -> tuple[str | None, bool]:
    """What the magic number says, and whether that alone is enough to refuse the file."""
    for magic, label in _MAGIC:
        if content.startswith(magic):
            return label, not magic.decode("latin-1").isprintable()
    return None, False


def _refused(what: str, source_name: str) -> ProcessingError:
    return ProcessingError(f"unsupported file type: {what}{_named(source_name)}")


def _named(source_name: str) -> str:
    """' although named report.txt' when the name claims text, else just the name."""
    if not source_name:
        return ""
    if _suffix(source_name) in _TEXT_SUFFIXES:
        return f" although named {source_name}"
    return f" (file {source_name})"


def _suffix(source_name: str) -> str:
    return PurePosixPath(source_name.replace("\\", "/")).suffix.lower()


def _with_article(label: str) -> str:
    return f"an {label}" if label[0].lower() in "aeiou" else f"a {label}"
