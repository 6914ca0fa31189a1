"""What a file's name says it is, for choosing the documents of a folder before reading a byte
(`ingest enqueue FOLDER`, `ingest sync`): the suffixes of the formats the parsers read, each
with the format's name in reports (detect.FORMAT_NAMES; a test keeps the two equal), and what
to call the files that are passed over (`1 stylesheet, 3 SVG images`). Once a file is taken,
its bytes decide its type (detect.py), never this table."""

from __future__ import annotations

from pathlib import PurePosixPath

DOCUMENT_SUFFIXES = {
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".md": "Markdown",
    ".markdown": "Markdown",
    ".mdown": "Markdown",
    ".mkd": "Markdown",
    ".html": "HTML",
    ".htm": "HTML",
    ".xhtml": "HTML",
    ".csv": "CSV",
    ".tsv": "TSV",
    ".tab": "TSV",
    ".rtf": "RTF",
    ".eml": "e-mail",
    ".pdf": "PDF",
    ".docx": "DOCX",
    ".dotx": "DOCX",
    ".xlsx": "XLSX",
    ".xltx": "XLSX",
    ".pptx": "PPTX",
    ".potx": "PPTX",
    ".odt": "ODT",
    ".ott": "ODT",
    ".ods": "ODS",
    ".ots": "ODS",
    ".odp": "ODP",
    ".otp": "ODP",
    ".epub": "EPUB",
    ".png": "PNG",
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".tif": "TIFF",
    ".tiff": "TIFF",
}

# What the files a folder holds beside its documents are called: (one, several).
_KINDS = {
    ("stylesheet", "stylesheets"): (".css", ".scss", ".sass", ".less"),
    ("script", "scripts"): (".js", ".mjs", ".cjs", ".ts"),
    ("SVG image", "SVG images"): (".svg", ".svgz"),
    ("GIF image", "GIF images"): (".gif",),
    ("WebP image", "WebP images"): (".webp",),
    ("icon", "icons"): (".ico",),
    ("font", "fonts"): (".woff", ".woff2", ".ttf", ".otf", ".eot"),
    ("source map", "source maps"): (".map",),
    ("archive", "archives"): (".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".tar", ".7z", ".rar"),
}
_KIND_OF = {suffix: kind for kind, suffixes in _KINDS.items() for suffix in suffixes}
NO_SUFFIX = ("file without a suffix", "files without a suffix")


def suffix_of(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def is_document_name(name: str) -> bool:
    """Whether the name's suffix is one of a format the parsers read (case aside)."""
    return suffix_of(name) in DOCUMENT_SUFFIXES


def kind_of(name: str) -> tuple[str, str]:
    """What a file that is not a document is called, once and in the plural:
    ("stylesheet", "stylesheets"), (".json file", ".json files")."""
    suffix = suffix_of(name)
    if not suffix:
        return NO_SUFFIX
    return _KIND_OF.get(suffix, (f"{suffix} file", f"{suffix} files"))
