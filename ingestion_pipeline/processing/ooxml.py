"""Office Open XML (DOCX, XLSX, PPTX): which one a ZIP archive is, and the archive's own
limits, checked before a library reads it.

The package's `[Content_Types].xml` names its main part; the file's name does not decide.
An archive whose members would expand past `expansion_limit(max_bytes)` is refused before
any of them is read (a zip bomb); the parsing child's memory limit catches one whose
directory lies about its sizes.
"""

from __future__ import annotations

import io
import zipfile

from .errors import ProcessingError

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
OOXML_TYPES = (DOCX, XLSX, PPTX)
_MAIN_PARTS = {
    "wordprocessingml.document.main": DOCX,
    "spreadsheetml.sheet.main": XLSX,
    "spreadsheetml.template.main": XLSX,
    "presentationml.presentation.main": PPTX,
}
_CONTENT_TYPES = "[Content_Types].xml"
_CONTENT_TYPES_MAX = 1024 * 1024
# What the members of an archive may expand to, in all: this many times the upload limit.
EXPANSION_FACTOR = 20
_MB = 1024 * 1024


def ooxml_type(content: bytes) -> str | None:
    """The Office type of a ZIP archive, or None for any other archive (or not a ZIP)."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            info = archive.getinfo(_CONTENT_TYPES)
            if info.file_size > _CONTENT_TYPES_MAX:
                return None
            types = archive.read(info).decode("utf-8", "replace")
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, RuntimeError, NotImplementedError):
        return None
    for marker, mime_type in _MAIN_PARTS.items():
        if marker in types:
            return mime_type
    return None


def expansion_limit(max_bytes: int) -> int:
    return EXPANSION_FACTOR * max_bytes


def open_package(content: bytes, max_bytes: int) -> io.BytesIO:
    """The bytes, for a library to read, once the archive's declared sizes are within the
    limit; ProcessingError otherwise."""
    limit = expansion_limit(max_bytes)
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
            encrypted = any(info.flag_bits & 0x1 for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ProcessingError(f"damaged Office file: {exc}") from None
    if encrypted:
        raise ProcessingError("password protected: the Office file's parts are encrypted")
    if expanded > limit:
        raise ProcessingError(
            f"the Office file expands to {expanded / _MB:,.0f} MB, over the {limit / _MB:,.0f} MB limit "
            f"({EXPANSION_FACTOR} x INGEST_MAX_FILE_BYTES): a zip bomb?"
        )
    return io.BytesIO(content)
