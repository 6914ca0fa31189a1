"""Opening a PDF with PDFium (pypdfium2): its pages' lines, outline, page labels and title;
OCR of the pages without a text layer; every failure as a ProcessingError in plain words (a
broken upload stays broken on retry, and the uploader should read "corrupt PDF", not a
traceback).

PDFium is not thread-safe: one call into it at a time in a process (the worker's threads
parse when INGEST_PARSE_PROCESSES=0), so every use holds _PDFIUM.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from ingestion_pipeline.errors import printable

from ..errors import ProcessingError
from ..images import MAX_IMAGE_PIXELS
from ..ocr import NO_TESSERACT, OcrOptions, TesseractMissing, read_pages
from .headings import OutlineEntry
from .lines import Page, Spacing, read_page

_PDFIUM = threading.Lock()
_EOF_MARKER = b"%%EOF"
_EOF_WINDOW = 2048  # writers may append a little after the marker
_DETAIL_LIMIT = 160
_OCR_DPI = 200  # Tesseract reads body text best from 200-300 dpi; past that it is slower, not better
# A PDF that claims more pages than any real document has is a bomb, not a book: refused
# before a page is read. (3,000 pages parse in about 10 s: bench/pdf_quality.py --big.)
MAX_PAGES = 20_000
_MAX_OUTLINE = 10_000  # outline entries read: a real outline has a few hundred
_XYZ = 1  # PDFDEST_VIEW_XYZ: a destination with a height


@dataclass(frozen=True)
class ReadPdf:
    pages: list[Page]
    outline: list[OutlineEntry]
    labels: list[str]  # each page's label where the PDF defines labels ("iv"), else []
    title: str | None


def open_pdf(content: bytes) -> ReadPdf:
    with _PDFIUM:
        document = _open(content)
        try:
            count = len(document)
            if count == 0:
                raise ProcessingError("corrupt PDF: the document has no pages")
            if count > MAX_PAGES:
                raise ProcessingError(f"a PDF of {count:,} pages: more than the {MAX_PAGES:,} a document may have")
            spacing = Spacing()
            pages = [_read(document, index, spacing) for index in range(count)]
            return ReadPdf(pages, _outline(document, count), _labels(document, count), _title(document))
        finally:
            document.close()


def _open(content: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(content)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise ProcessingError("encrypted PDF: it needs a password to open") from None
        if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
            raise ProcessingError("encrypted PDF: it uses an encryption this server cannot open") from None
        raise _corrupt(content, "could not read the document structure", exc) from None


def _read(document: pdfium.PdfDocument, index: int, spacing: Spacing) -> Page:
    try:
        return read_page(document, index, spacing)
    except pdfium.PdfiumError as exc:
        raise ProcessingError(f"corrupt PDF: could not read page {index + 1} ({_detail(exc)})") from None


def _outline(document: pdfium.PdfDocument, count: int) -> list[OutlineEntry]:
    entries: list[OutlineEntry] = []
    for bookmark in document.get_toc():
        if len(entries) >= _MAX_OUTLINE:
            break
        destination = bookmark.get_dest()
        title = " ".join((bookmark.get_title() or "").split())
        if destination is None or not title:
            continue
        page = destination.get_index()
        if page is None or not 0 <= page < count:
            continue
        mode, view = destination.get_view()
        top = view[1] if mode == _XYZ and len(view) > 1 and math.isfinite(view[1]) and view[1] > 0 else None
        entries.append(OutlineEntry(bookmark.level + 1, title, page, top))
    return entries


def _labels(document: pdfium.PdfDocument, count: int) -> list[str]:
    """Page labels when the PDF defines them and they say something a page's number does
    not ("iv", "A-3"): then a hit can name the page as the reader's viewer does."""
    labels = [document.get_page_label(index) for index in range(count)]
    if not any(labels) or labels == [str(number) for number in range(1, count + 1)]:
        return []
    return labels


def _title(document: pdfium.PdfDocument) -> str | None:
    # A damaged /Info dictionary should not cost the document: the title is optional.
    try:
        return document.get_metadata_value("Title") or None
    except Exception:
        return None


def read_scans(content: bytes, scanned: list[int], pages: int, ocr: OcrOptions) -> tuple[dict[int, str], list[str]]:
    """OCR of the pages without a text layer (index -> text), and notes on what was not read."""
    what = f"{len(scanned):,} page{'s' if len(scanned) > 1 else ''} without a text layer"
    if not ocr.enabled:
        return {}, [f"{what} not read: INGEST_OCR=off"]
    with _PDFIUM:
        document = _open(content)
    try:
        result = read_pages([_renderer(document, index) for index in scanned], ocr, what="pages without a text layer")
    except TesseractMissing:  # a page with print on it (blank ones read as blank without Tesseract)
        if len(scanned) == pages:
            raise ProcessingError(f"a scanned PDF: {NO_TESSERACT}") from None
        return {}, [f"{what} not read: Tesseract is not installed (apt-get install tesseract-ocr)"]
    finally:
        with _PDFIUM:
            document.close()
    return dict(zip(scanned, result.texts, strict=False)), list(result.notes)


def _renderer(document: pdfium.PdfDocument, index: int) -> Callable[[], Image.Image]:
    def render() -> Image.Image:
        with _PDFIUM:
            try:
                page = document[index]
                if not pdfium_c.FPDFPage_CountObjects(page.raw) and not pdfium_c.FPDFPage_GetAnnotCount(page.raw):
                    # Nothing on the page to draw (TeX's blank versos): it renders white,
                    # which OCR reads as blank; a white pixel says so without the rendering.
                    return Image.new("L", (1, 1), 255)
                width, height = page.get_size()  # points: 1/72 inch
                # At most MAX_IMAGE_PIXELS, whatever size the page claims.
                scale = min(_OCR_DPI / 72, math.sqrt(MAX_IMAGE_PIXELS / max(width * height, 1.0)))
                image: Image.Image = page.render(scale=scale, grayscale=True).to_pil()
                return image
            except pdfium.PdfiumError as exc:
                raise ProcessingError(f"corrupt PDF: could not render page {index + 1} ({_detail(exc)})") from None

    return render


def _corrupt(content: bytes, what: str, exc: Exception) -> ProcessingError:
    if _EOF_MARKER not in content[-_EOF_WINDOW:]:
        # The usual cause: an interrupted upload or download.
        return ProcessingError("corrupt PDF: the file is truncated or damaged (it has no %%EOF end marker)")
    return ProcessingError(f"corrupt PDF: {what} ({_detail(exc)})")


def _detail(exc: Exception) -> str:
    """The library's words, printable only (a damaged file's bytes are not a message)."""
    return printable(str(exc), _DETAIL_LIMIT) or type(exc).__name__
