"""PDF: pypdf text extraction, one page per PDF page, one section per page. Pages without
a text layer (scans) are rendered by pypdfium2 and read by OCR (ocr.py).

Every pypdf failure becomes a ProcessingError in plain words: a broken upload stays
broken on retry, and the uploader should read "corrupt PDF", not a traceback.
"""

from __future__ import annotations

import io
import logging
import math
import threading
from collections.abc import Callable

import pypdfium2 as pdfium
from PIL import Image
from pypdf import PageObject, PasswordType, PdfReader
from pypdf.errors import DependencyError

from .document import DraftSection, assemble
from .errors import ProcessingError
from .images import MAX_IMAGE_PIXELS
from .model import ParsedDocument
from .ocr import DEFAULT_OCR, NO_TESSERACT, OcrOptions, read_pages, tesseract_found

_EOF_MARKER = b"%%EOF"
_EOF_WINDOW = 2048  # writers may append a little after the marker
_DETAIL_LIMIT = 160
_OCR_DPI = 200  # Tesseract reads body text best from 200-300 dpi; past that it is slower, not better
# PDFium is not thread-safe: one render at a time in a process (the worker's threads parse
# when INGEST_PARSE_PROCESSES=0).
_PDFIUM = threading.Lock()


def _quiet_pypdf() -> None:
    """pypdf logs a WARNING for every defect it repairs on its own ("EOF marker not found",
    "Ignoring wrong pointing object"), flooding worker logs. Keep its errors; leave a level
    alone if the operator set one."""
    logger = logging.getLogger("pypdf")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)


_quiet_pypdf()


def parse_pdf(content: bytes, ocr: OcrOptions = DEFAULT_OCR) -> ParsedDocument:
    reader = _open(content)
    texts = [_page_text(page, number) for number, page in enumerate(_pages(reader, content), 1)]
    scanned = [index for index, text in enumerate(texts) if not text.strip()]
    notes = _read_scans(content, texts, scanned, ocr) if scanned else []
    sections = [DraftSection(None, 1, index, text) for index, text in enumerate(texts)]
    return assemble("application/pdf", texts, sections, title=_metadata_title(reader), notes=notes)


def _read_scans(content: bytes, texts: list[str], scanned: list[int], ocr: OcrOptions) -> list[str]:
    """OCR the pages without a text layer into `texts`; the notes on what was not read."""
    pages = f"{len(scanned):,} page{'s' if len(scanned) > 1 else ''} without a text layer"
    if not ocr.enabled:
        return [f"{pages} not read: INGEST_OCR=off"]
    if not tesseract_found():
        if len(scanned) == len(texts):
            raise ProcessingError(f"a scanned PDF: {NO_TESSERACT}")
        return [f"{pages} not read: Tesseract is not installed (apt-get install tesseract-ocr)"]
    with _PDFIUM:
        try:
            document = pdfium.PdfDocument(content)
        except pdfium.PdfiumError as exc:
            raise ProcessingError(
                f"corrupt PDF: could not open it to read its scanned pages ({_detail(exc)})"
            ) from None
    try:
        result = read_pages([_renderer(document, index) for index in scanned], ocr, what="pages without a text layer")
    finally:
        with _PDFIUM:
            document.close()
    for index, text in zip(scanned, result.texts, strict=False):
        texts[index] = text
    return result.notes


def _renderer(document: pdfium.PdfDocument, index: int) -> Callable[[], Image.Image]:
    def render() -> Image.Image:
        with _PDFIUM:
            try:
                page = document[index]
                width, height = page.get_size()  # points: 1/72 inch
                # At most MAX_IMAGE_PIXELS, whatever size the page claims.
                scale = min(_OCR_DPI / 72, math.sqrt(MAX_IMAGE_PIXELS / max(width * height, 1.0)))
                image: Image.Image = page.render(scale=scale, grayscale=True).to_pil()
                return image
            except pdfium.PdfiumError as exc:
                raise ProcessingError(f"corrupt PDF: could not render page {index + 1} ({_detail(exc)})") from None

    return render


def _open(content: bytes) -> PdfReader:
    try:
        # strict=False: repair what can be repaired (bad offsets, missing EOF marker).
        reader = PdfReader(io.BytesIO(content), strict=False)
    except DependencyError:
        raise _no_aes() from None
    except Exception as exc:
        raise _corrupt(content, "could not read the document structure", exc) from None
    if reader.is_encrypted:
        _decrypt(reader)
    return reader


def _decrypt(reader: PdfReader) -> None:
    """Many PDFs are encrypted only to restrict printing or copying; those open with the
    empty user password. Anything else needs a password we do not have."""
    try:
        result = reader.decrypt("")
    except DependencyError:
        raise _no_aes() from None
    except Exception as exc:
        raise ProcessingError(f"encrypted PDF: could not decrypt it ({_detail(exc)})") from None
    if result == PasswordType.NOT_DECRYPTED:
        raise ProcessingError("encrypted PDF: it needs a password to open")


def _pages(reader: PdfReader, content: bytes) -> list[PageObject]:
    try:
        pages = list(reader.pages)
    except Exception as exc:
        raise _corrupt(content, "could not read the list of pages", exc) from None
    if not pages:
        raise ProcessingError("corrupt PDF: the document has no pages")
    return pages


def _page_text(page: PageObject, number: int) -> str:
    try:
        return page.extract_text() or ""
    except DependencyError:  # AES is only needed once the page streams are decrypted
        raise _no_aes() from None
    except Exception as exc:
        raise ProcessingError(f"corrupt PDF: could not extract the text of page {number} ({_detail(exc)})") from None


def _metadata_title(reader: PdfReader) -> str | None:
    # A damaged /Info dictionary should not cost the document: the title is optional.
    try:
        metadata = reader.metadata
        return metadata.title if metadata else None
    except Exception:
        return None


def _no_aes() -> ProcessingError:
    # pypdf decrypts AES only with the optional 'cryptography' package installed.
    return ProcessingError(
        "encrypted PDF: it uses AES encryption, which this server cannot decrypt"
        " (the 'cryptography' package is not installed)"
    )


def _corrupt(content: bytes, what: str, exc: Exception) -> ProcessingError:
    if _EOF_MARKER not in content[-_EOF_WINDOW:]:
        # The usual cause: an interrupted upload or download.
        what = "the file is truncated or damaged (it has no %%EOF end marker)"
        return ProcessingError(f"corrupt PDF: {what}")
    if "xref" in str(exc).lower():
        what = "could not read the cross-reference table"  # the index of every object
    return ProcessingError(f"corrupt PDF: {what} ({_detail(exc)})")


def _detail(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"
