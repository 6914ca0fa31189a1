"""What kind of document the bytes are. Names are hints at most: the bytes decide."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from .delimited import CSV, DELIMITED_SUFFIXES, TSV
from .errors import ProcessingError
from .formats import EML, IMAGE_TYPES
from .packages import PACKAGE_NAMES, PACKAGE_TYPES, package_type
from .rtf import RTF
from .text import decode_text

SUPPORTED_TYPES = (
    "text/plain",
    "text/markdown",
    "text/html",
    *sorted(set(DELIMITED_SUFFIXES.values())),
    RTF,
    EML,
    "application/pdf",
    *PACKAGE_TYPES,
    *IMAGE_TYPES,
)

# What reports call each type (`ingest work`'s per-format table).
FORMAT_NAMES = {
    "text/plain": "text",
    "text/markdown": "Markdown",
    "text/html": "HTML",
    CSV: "CSV",
    TSV: "TSV",
    RTF: "RTF",
    EML: "e-mail",
    "application/pdf": "PDF",
    **PACKAGE_NAMES,
    **IMAGE_TYPES,
}
_MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd"}
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
_TEXT_SUFFIXES = {".txt", ".text", ".log"} | set(DELIMITED_SUFFIXES) | _MARKDOWN_SUFFIXES | _HTML_SUFFIXES
_LEADING_JUNK = b" \t\r\n\x00\xef\xbb\xbf"  # whitespace and a UTF-8 byte-order mark
_PDF_MAGIC = b"%PDF-"
_PDF_HEADER_WINDOW = 1024  # readers accept the header anywhere in the first 1 KB

# Images read by OCR (images.py), by their magic numbers.
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# An encrypted OOXML file is an OLE container holding a stream of this name (UTF-16 in
# the container's directory), whatever its suffix.
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
# Magic numbers of formats people upload by mistake, to say what a refused file is.
_MAGIC = (
    (b"PK\x03\x04", "ZIP archive"),
    (b"PK\x05\x06", "ZIP archive"),
    (b"\x89PNG", "PNG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\x1f\x8b", "gzip archive"),
    (b"Rar!\x1a\x07", "RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (_OLE_MAGIC, "legacy Microsoft Office document (save it as .docx, .xlsx or .pptx)"),
    (b"\x7fELF", "executable program"),
    (b"SQLite format 3\x00", "SQLite database"),
)
# A text file may legitimately start with "GIF89a", so a printable magic number only names
# a file that also fails to decode; the others refuse the file outright.
_RTF_MAGIC = b"{\\rtf"
# An e-mail without the .eml suffix: its first line is a header, and From: is among them.
_EMAIL_START = re.compile(
    rb"(?:Return-Path|Received|Delivered-To|From|To|Subject|Date|Message-ID|MIME-Version|X-[\w-]+):[ \t]",
    re.IGNORECASE,
)
_EMAIL_HEADERS = re.compile(rb"^(?:From|Subject|Date|Message-ID|MIME-Version):", re.IGNORECASE | re.MULTILINE)
_EMAIL_WINDOW = 8192

_HTML_START = re.compile(
    r"\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>/]",
    re.IGNORECASE | re.DOTALL,
)


def format_name(mime_type: str | None) -> str:
    """A type's name in reports; "unrecognised" for a file refused before its type was known."""
    if mime_type is None:
        return "unrecognised"
    return FORMAT_NAMES.get(mime_type, mime_type)


def detect_type(content: bytes, source_name: str) -> str:
    """One of SUPPORTED_TYPES, or ProcessingError saying what the file looks like."""
    return sniff(content, source_name)[0]


def sniff(content: bytes, source_name: str) -> tuple[str, str | None]:
    """The type and, for text types, the decoded text (so parse decodes only once); None
    for a type parsed from its bytes (PDF, images, packages, e-mail)."""
    if not content:
        raise ProcessingError("file is empty")
    suffix = _suffix(source_name)
    binary = _binary_type(content, suffix)
    if binary is not None:
        return binary, None
    label, final = _magic(content)
    if suffix == ".pdf":
        looks = f"; it looks like {_with_article(label)}" if label else ""
        raise ProcessingError(f"not a PDF: {source_name} does not start with %PDF-{looks}")
    if content.startswith(_OLE_MAGIC) and _ENCRYPTED_PACKAGE in content:
        raise ProcessingError("password protected: the Office file is encrypted; upload it without a password")
    if content.startswith(_RTF_MAGIC):
        return RTF, content.decode("latin-1")  # RTF is 7-bit: other characters are escapes
    if suffix == ".eml" or _looks_like_email(content):
        return EML, None
    if final:
        raise _refused(f"looks like binary data ({label})", source_name)
    try:
        text = decode_text(content)
    except ProcessingError as exc:
        what = f"looks like binary data ({label})" if label else str(exc)
        raise _refused(what, source_name) from None
    return _text_type(text, suffix), text


def _binary_type(content: bytes, suffix: str) -> str | None:
    if _is_pdf(content, suffix):
        return "application/pdf"
    if content.startswith(b"PK\x03\x04"):
        return package_type(content)
    return next((kind for magic, kind in _IMAGE_MAGIC if content.startswith(magic)), None)


def _looks_like_email(content: bytes) -> bool:
    """Headers first (the first line is one), From: among them and one more only mail has."""
    head = re.split(rb"\r?\n\r?\n", content[:_EMAIL_WINDOW], maxsplit=1)[0]
    if not _EMAIL_START.match(head):
        return False
    names = {name.lower() for name in _EMAIL_HEADERS.findall(head)}
    return b"from:" in names and len(names) >= 2


def _text_type(text: str, suffix: str) -> str:
    if suffix in DELIMITED_SUFFIXES:
        return DELIMITED_SUFFIXES[suffix]
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
