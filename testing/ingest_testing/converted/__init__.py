"""A corpus of documents made by the converters people's files come from, written from
known text: pandoc (Markdown to DOCX, ODT, EPUB, RTF, PPTX), LibreOffice headless (CSV to
XLSX and ODS, PPTX to ODP, DOCX to PDF), Python's `email` package (an EML with an HTML body,
its text/plain alternative and a DOCX attachment), plain CSV and TSV, and scans: PNG, JPEG
and TIFF page images and an image-only PDF, rendered at 150 dpi (pypdfium2) from a PDF that
LibreOffice made, the PDF put together by Pillow.

Every file carries a distinctive phrase in its middle (a made-up codename among
PostgreSQL-manual-style prose); the records returned say which, so a test searches for it
and expects that file. For the scans they also carry the source text, to measure OCR.

    missing = missing_tools(CORPUS_TOOLS)  # ["pandoc (apt-get install pandoc)", ...] or []
    files = build_corpus(folder)           # list[ConvertedFile]
    scans = make_scans(folder, [ScanSource("memo", "png", (page_text,), "a phrase")])

The content is a pure function of this package: building into the same folder again finds
the files of the last build (a hidden manifest with the fingerprint of the texts) and
converts nothing. Converters run few and in parallel: pandoc once per file, LibreOffice
once per target format (with a private profile, so parallel runs do not collide).

The modules: texts (the prose, the documents, the tables and their Markdown), converters
(running pandoc and LibreOffice), scans (printing and rendering pages), corpus (writing the
corpus's files); this one builds the corpus and keeps its manifest.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from ingest_testing.converted.converters import (
    CORPUS_TOOLS,
    SCAN_TOOLS,
    ConversionError,
    ConvertedFile,
    missing_tools,
)
from ingest_testing.converted.corpus import write_corpus
from ingest_testing.converted.scans import DPI, ScanSource, make_scans
from ingest_testing.converted.texts import TABLES, Text, document_texts, table

__all__ = [
    "CORPUS_TOOLS",
    "DPI",
    "SCAN_TOOLS",
    "ConversionError",
    "ConvertedFile",
    "ScanSource",
    "build_corpus",
    "make_scans",
    "missing_tools",
]

_MANIFEST = ".converted-corpus.json"


def build_corpus(folder: Path) -> list[ConvertedFile]:
    """Write the corpus into `folder` (made if need be) and say what each file is. A folder
    that already holds this corpus (same texts, every file present) is reused as it is."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = document_texts()
    fingerprint = _fingerprint(texts)
    cached = _cached(folder, fingerprint)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix=".converted-", dir=folder) as scratch:
        records = write_corpus(folder, Path(scratch), texts)
    _write_manifest(folder, fingerprint, records)
    return records


def _fingerprint(texts: dict[str, Text]) -> str:
    """A hash of everything the corpus is made from: the texts, the tables, the resolution
    and the source of this package's modules."""
    modules = hashlib.sha256()
    for module in sorted(Path(__file__).parent.glob("*.py")):
        modules.update(module.name.encode() + b"\0" + module.read_bytes() + b"\0")
    spec = {
        "texts": {label: [text.title, text.sections, text.phrase] for label, text in texts.items()},
        "tables": {label: table(label) for label in TABLES},
        "dpi": DPI,
        "modules": modules.hexdigest(),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _write_manifest(folder: Path, fingerprint: str, records: list[ConvertedFile]) -> None:
    manifest = {
        "fingerprint": fingerprint,
        "files": [
            {
                "name": record.path.name,
                "format": record.format,
                "phrase": record.phrase,
                "made_by": record.made_by,
                "source_text": record.source_text,
            }
            for record in records
        ],
    }
    (folder / _MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def _cached(folder: Path, fingerprint: str) -> list[ConvertedFile] | None:
    """The records of the manifest in `folder` when it has this fingerprint and every file."""
    try:
        manifest = json.loads((folder / _MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("fingerprint") != fingerprint:
        return None
    records = [
        ConvertedFile(folder / item["name"], item["format"], item["phrase"], item["made_by"], item["source_text"])
        for item in manifest["files"]
    ]
    if not all(record.path.is_file() for record in records):
        return None
    return records
