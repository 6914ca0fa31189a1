"""ZIP-based documents (Office Open XML, OpenDocument, EPUB): which one an archive is, and
the archive's own limits, checked before a library reads it.

The package's own manifest decides, never the file's name: OOXML's `[Content_Types].xml`
names its main part; OpenDocument and EPUB start with a `mimetype` member. An archive whose
members would expand past `expansion_limit(max_bytes)` is refused before any of them is
read (a zip bomb); the parsing child's memory limit catches one whose directory lies about
its sizes.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from ingestion_pipeline.errors import printable

from .errors import ProcessingError

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ODT = "application/vnd.oasis.opendocument.text"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
ODP = "application/vnd.oasis.opendocument.presentation"
EPUB = "application/epub+zip"
# What messages and reports call each package type.
PACKAGE_NAMES = {DOCX: "DOCX", XLSX: "XLSX", PPTX: "PPTX", ODT: "ODT", ODS: "ODS", ODP: "ODP", EPUB: "EPUB"}
PACKAGE_TYPES = tuple(PACKAGE_NAMES)
_MAIN_PARTS = {
    "wordprocessingml.document.main": DOCX,
    "wordprocessingml.template.main": DOCX,
    "spreadsheetml.sheet.main": XLSX,
    "spreadsheetml.template.main": XLSX,
    "presentationml.presentation.main": PPTX,
    "presentationml.template.main": PPTX,
}
# The `mimetype` member of OpenDocument and EPUB; templates read like their documents.
_MIMETYPES = {
    ODT: ODT,
    ODT.replace("text", "text-template"): ODT,
    ODS: ODS,
    ODS.replace("spreadsheet", "spreadsheet-template"): ODS,
    ODP: ODP,
    ODP.replace("presentation", "presentation-template"): ODP,
    EPUB: EPUB,
}
_CONTENT_TYPES = "[Content_Types].xml"
_ODF_MANIFEST = "META-INF/manifest.xml"
_SMALL_MEMBER = 1024 * 1024  # manifests are a few KB; a bigger one is not what it claims
# What the members of an archive may expand to, in all: this many times the upload limit.
EXPANSION_FACTOR = 20
_MB = 1024 * 1024


def package_type(content: bytes) -> str | None:
    """The document type of a ZIP archive, or None for any other archive (or not a ZIP)."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
            if "mimetype" in names:
                return _MIMETYPES.get(_small_member(archive, "mimetype").strip())
            if _CONTENT_TYPES in names:
                types = _small_member(archive, _CONTENT_TYPES)
                return next((kind for marker, kind in _MAIN_PARTS.items() if marker in types), None)
    # zlib.error: a member whose compressed bytes are damaged (a bit flipped in transit)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, RuntimeError, NotImplementedError, ValueError, zlib.error):
        return None
    return None


def _small_member(archive: zipfile.ZipFile, name: str) -> str:
    info = archive.getinfo(name)
    if info.file_size > _SMALL_MEMBER:
        raise ValueError(f"{name} is {info.file_size} bytes")
    return archive.read(info).decode("utf-8", "replace")


def expansion_limit(max_bytes: int) -> int:
    return EXPANSION_FACTOR * max_bytes


def open_package(content: bytes, max_bytes: int, kind: str) -> io.BytesIO:
    """The bytes, for a library to read, once the archive's declared sizes are within the
    limit and nothing in it is encrypted; ProcessingError otherwise."""
    limit = expansion_limit(max_bytes)
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
            encrypted = any(info.flag_bits & 0x1 for info in archive.infolist())
            if not encrypted and _ODF_MANIFEST in archive.namelist():
                # OpenDocument encrypts inside the archive and says so in its manifest.
                encrypted = "encryption-data" in _small_member(archive, _ODF_MANIFEST)
    except (zipfile.BadZipFile, OSError, EOFError, KeyError, ValueError, zlib.error) as exc:
        raise ProcessingError(f"damaged {kind} file: {printable(str(exc))}") from None
    if encrypted:
        raise ProcessingError(f"password protected: the {kind} file is encrypted; upload it without a password")
    if expanded > limit:
        raise ProcessingError(
            f"the {kind} file expands to {expanded / _MB:,.0f} MB, over the {limit / _MB:,.0f} MB limit "
            f"({EXPANSION_FACTOR} x INGEST_MAX_FILE_BYTES): a zip bomb?"
        )
    return io.BytesIO(content)
