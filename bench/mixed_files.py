"""The files of `ingest_corpus.py --corpus mixed` (mixed_corpus.py): copies of the converted
corpus's documents and scans (testing/ingest_testing/converted), each copy with its
own bytes, and the start-up CSVs whose drains measure a drain's fixed cost."""

from __future__ import annotations

import io
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ingest_testing.converted import ConvertedFile, ScanSource, build_corpus, make_scans

DOCUMENTS = ("docx", "odt", "epub", "rtf", "pptx", "odp", "xlsx", "ods", "csv", "tsv", "eml", "pdf")
SCANS = ("png", "jpeg", "tiff", "pdf-scan")
STARTUP = "start-up"  # one CSV drained alone: what a drain costs before its documents
STARTUP_DRAINS = 3  # before the documents' formats, before the scans', after them: their median
ZIPPED = {"docx", "odt", "epub", "pptx", "odp", "xlsx", "ods"}


@dataclass(frozen=True)
class MixedFile:
    path: Path
    label: str  # a label of DOCUMENTS or SCANS, or STARTUP


# -- the corpus ---------------------------------------------------------------------------


def build_mixed(folder: Path, copies: int, scan_copies: int) -> list[MixedFile]:
    """folder/documents/copy-NN/… and folder/scans/…, each copy with its own bytes."""
    with tempfile.TemporaryDirectory(prefix="mixed-corpus-") as scratch:
        records = build_corpus(Path(scratch))
        files = [
            MixedFile(copy_document(record, folder / "documents" / f"copy-{number:02d}", number), record.format)
            for number in range(1, copies + 1)
            for record in records
            if record.format in DOCUMENTS
        ]
        csv = next(record for record in records if record.format == "csv")
        files += [
            MixedFile(copy_document(csv, folder / STARTUP / f"copy-{number:02d}", 100 + number), STARTUP)
            for number in range(1, STARTUP_DRAINS + 1)
        ]
    scans = [record for record in records if record.format in SCANS]
    sources = [(scan.format, scan_source(scan, number)) for number in range(1, scan_copies + 1) for scan in scans]
    made = make_scans(folder / "scans", [source for _, source in sources]) if sources else []
    return files + [MixedFile(record.path, label) for (label, _), record in zip(sources, made, strict=True)]


def copy_document(record: ConvertedFile, folder: Path, number: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / record.path.name
    target.write_bytes(variant(record.format, record.path.read_bytes(), number))
    return target


def variant(label: str, data: bytes, number: int) -> bytes:
    """The file's bytes made this copy's own, its content as the parser sees it (nearly) kept."""
    mark = f"bench copy {number}"
    if label in ZIPPED:
        return zip_comment(data, mark.encode())
    if label in ("csv", "tsv"):
        separator = "\t" if label == "tsv" else ","
        return data + separator.join([mark, "variant", "copy", str(number)]).encode() + b"\n"
    if label == "rtf":
        end = data.rindex(b"}")
        return data[:end] + f"\\par {mark.capitalize()}.\n".encode() + data[end:]
    if label == "eml":
        return f"X-Bench-Copy: {number}\r\n".encode() + data
    if label == "pdf":
        return data + f"%{mark}\n".encode()  # a comment after %%EOF: readers ignore it
    raise ValueError(f"no variant for {label}")


def zip_comment(data: bytes, comment: bytes) -> bytes:
    """The archive with `comment` as its comment: members, and their order, untouched."""
    buffer = io.BytesIO(data)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.comment = comment
    return buffer.getvalue()


def scan_source(scan: ConvertedFile, number: int) -> ScanSource:
    """The scan's text printed again, a full page each page (its title with the copy's and
    the page's number, the paragraphs rotated by them): TIFF and PDF two pages, PNG and
    JPEG one."""
    title, *paragraphs = (scan.source_text or "").split("\n\n")
    count = 2 if scan.format in ("tiff", "pdf-scan") else 1
    pages = tuple(
        "\n\n".join(rotate([f"{title}, copy {number}, page {page}", *paragraphs], number + page))
        for page in range(1, count + 1)
    )
    kind = "pdf" if scan.format == "pdf-scan" else scan.format
    return ScanSource(f"{scan.path.stem}-{number:02d}", kind, pages, scan.phrase)


def rotate(paragraphs: list[str], by: int) -> list[str]:
    """The first paragraph (a page's title) kept first, the rest rotated."""
    head, rest = paragraphs[:1], paragraphs[1:]
    if not rest:
        return head
    by %= len(rest)
    return head + rest[by:] + rest[:by]
