"""Scans: pages of plain prose printed (pandoc DOCX, then LibreOffice PDF) and rendered at a
resolution with pypdfium2, saved by Pillow as a PNG, JPEG or TIFF page image or an
image-only PDF.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# pypdfium2 has no py.typed: ignored whether or not the project's mypy settings already
# know that (unused-ignore)
import pypdfium2  # type: ignore[import-untyped, unused-ignore]
from PIL import Image

from ingest_testing.converted.converters import (
    ConversionError,
    ConvertedFile,
    deferred,
    in_parallel,
    run_pandoc,
    run_soffice,
)
from ingest_testing.converted.texts import escape_markdown

DPI = 150
# A page break in a DOCX, as pandoc passes raw OOXML through.
_PAGE_BREAK = '```{=openxml}\n<w:p><w:r><w:br w:type="page"/></w:r></w:p>\n```'


@dataclass(frozen=True)
class ScanSource:
    """Pages of plain prose (paragraphs separated by blank lines) to print and scan as one
    file: `kind` png or jpeg (one page), tiff or pdf (any number). `phrase`: a phrase of
    the text, for the record."""

    name: str  # the file's stem
    kind: str
    pages: tuple[str, ...]
    phrase: str

    @property
    def text(self) -> str:
        return "\n\n".join(self.pages)


def make_scans(folder: Path, sources: Sequence[ScanSource], *, dpi: int = DPI) -> list[ConvertedFile]:
    """Print each source (pandoc DOCX, then one LibreOffice run to PDF) and scan its pages at
    `dpi` into `folder` as PNG, JPEG, TIFF or an image-only PDF."""
    check_scans(sources)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".converted-", dir=folder) as work:
        pdfs = _print_scans(Path(work), sources)
        return scan_records(folder, sources, pdfs, dpi)


def check_scans(sources: Sequence[ScanSource]) -> None:
    """Raise ValueError for a source whose kind, number of pages or phrase is wrong."""
    for source in sources:
        if source.kind not in ("png", "jpeg", "tiff", "pdf"):
            raise ValueError(f"{source.name}: a scan is png, jpeg, tiff or pdf, not {source.kind!r}")
        if source.kind in ("png", "jpeg") and len(source.pages) != 1:
            raise ValueError(f"{source.name}: a {source.kind} scan is one page, not {len(source.pages)}")
        if not source.pages or source.phrase not in " ".join(source.text.split()):
            raise ValueError(f"{source.name}: the phrase {source.phrase!r} is not in its pages")


def scan_markdown(source: ScanSource) -> str:
    """The source's pages as Markdown, each paragraph on one line, a page break between pages."""
    pages = [
        "\n\n".join(escape_markdown(" ".join(p.split())) for p in page.split("\n\n") if p.strip())
        for page in source.pages
    ]
    return f"\n\n{_PAGE_BREAK}\n\n".join(pages) + "\n"


def scan_records(folder: Path, sources: Sequence[ScanSource], pdfs: Sequence[Path], dpi: int) -> list[ConvertedFile]:
    """Each source's printed PDF (`pdfs`, in the same order) scanned into `folder`."""
    return [
        ConvertedFile(
            _render(pdf, source, folder, dpi),
            "pdf-scan" if source.kind == "pdf" else source.kind,
            source.phrase,
            "pypdfium2+Pillow",
            source.text,
        )
        for source, pdf in zip(sources, pdfs, strict=True)
    ]


def _print_scans(work: Path, sources: Sequence[ScanSource]) -> list[Path]:
    docx = [work / f"{source.name}.docx" for source in sources]
    in_parallel([deferred(run_pandoc, scan_markdown(source), path) for source, path in zip(sources, docx, strict=True)])
    return run_soffice("pdf", docx, work / "pdf")


def _render(pdf: Path, source: ScanSource, folder: Path, dpi: int) -> Path:
    """The PDF's pages as the scan `source.kind` says, after checking it has one page per
    page of text (a page that overflowed would make the source text wrong)."""
    document = pypdfium2.PdfDocument(pdf)
    try:
        if len(document) != len(source.pages):
            raise ConversionError(
                f"{pdf.name} has {len(document)} page(s) for {len(source.pages)} page(s) of text: shorten the pages"
            )
        images: list[Image.Image] = [page.render(scale=dpi / 72, grayscale=True).to_pil() for page in document]
    finally:
        document.close()
    extension = {"png": "png", "jpeg": "jpg", "tiff": "tif", "pdf": "pdf"}[source.kind]
    target = folder / f"{source.name}.{extension}"
    first, rest = images[0], images[1:]
    if source.kind == "png":
        first.save(target, format="PNG", dpi=(dpi, dpi))
    elif source.kind == "jpeg":
        first.save(target, format="JPEG", quality=85, dpi=(dpi, dpi))
    elif source.kind == "tiff":
        first.save(target, format="TIFF", compression="tiff_lzw", dpi=(dpi, dpi), save_all=True, append_images=rest)
    else:
        first.save(target, format="PDF", resolution=float(dpi), save_all=True, append_images=rest)
    return target
