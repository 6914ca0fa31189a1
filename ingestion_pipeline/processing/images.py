"""Images (PNG, JPEG, TIFF): each frame a page read by OCR (ocr.py), one section per page.

Pillow reads only the header when it opens an image, so the size is checked before any
pixel is decoded: an image past MAX_IMAGE_PIXELS (a decompression bomb, or a scan at a
resolution nobody needs) fails without the memory it would take.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from PIL import Image, UnidentifiedImageError

from .document import DraftSection, assemble
from .errors import ProcessingError
from .formats import IMAGE_TYPES
from .model import ParsedDocument
from .ocr import NO_TESSERACT, OcrOptions, TesseractMissing, read_pages

# 64 megapixels: an A4 page scanned at 600 dpi is 35.
MAX_IMAGE_PIXELS = 64_000_000


def parse_image(content: bytes, mime_type: str, ocr: OcrOptions) -> ParsedDocument:
    kind = IMAGE_TYPES[mime_type]
    if not ocr.enabled:
        raise ProcessingError(f"no text could be extracted: a {kind} image is read only by OCR, and INGEST_OCR=off")
    try:
        with Image.open(io.BytesIO(content)) as image:
            check_pixels(image.width, image.height, kind)
            frames = getattr(image, "n_frames", 1)
            result = read_pages([_frame(image, index, kind) for index in range(frames)], ocr)
    except TesseractMissing:  # only once a frame decoded with something on it: a damaged image says so
        raise ProcessingError(f"a {kind} image: {NO_TESSERACT}") from None
    except Image.DecompressionBombError:  # Pillow's own check, past twice its bound, as it opens
        raise ProcessingError(
            f"the {kind} image is far over the {MAX_IMAGE_PIXELS / 1e6:.0f}-megapixel limit: a decompression bomb?"
        ) from None
    except UnidentifiedImageError:
        raise ProcessingError(f"damaged {kind} image: it cannot be decoded") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ProcessingError(f"damaged {kind} image: {' '.join(str(exc).split())[:200]}") from None
    sections = [DraftSection(None, 1, index, text) for index, text in enumerate(result.texts)]
    return assemble(mime_type, result.texts, sections, title=None, notes=result.notes)


def _frame(image: Image.Image, index: int, kind: str) -> Callable[[], Image.Image]:
    def render() -> Image.Image:
        image.seek(index)
        check_pixels(image.width, image.height, kind)
        return image.copy()  # decodes this frame only

    return render


def check_pixels(width: int, height: int, kind: str) -> None:
    if width * height > MAX_IMAGE_PIXELS:
        raise ProcessingError(
            f"the {kind} image is {width:,} x {height:,} pixels ({width * height / 1e6:,.0f} megapixels), over the "
            f"{MAX_IMAGE_PIXELS / 1e6:.0f}-megapixel limit: a decompression bomb?"
        )
