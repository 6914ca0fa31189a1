"""OCR of scanned pages: Tesseract (Debian's `tesseract-ocr`) through pytesseract.

Pages come as functions that render them, so only the pages read are ever in memory, one
at a time. A blank page is recognised from its pixels and never sent to Tesseract. Reading
stops, with a note that says why, after `max_pages` pages or once `time_budget_seconds` are
spent (the worker sets the budget inside the parse timeout, so a long scan is indexed as
far as it was read instead of failing). Tesseract is needed only for a page with something
printed on it: without it a damaged image is still damaged and a blank scan still blank.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytesseract
from PIL import Image

from .errors import ProcessingError

if TYPE_CHECKING:
    from ingestion_pipeline.settings import Settings

# Tesseract runs one OpenMP thread per core by default; the worker already runs one parsing
# child per core, and Tesseract's own guidance is one thread each when pages run in parallel.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

_BLANK_CONTRAST = 32  # darkest to lightest grey level below this: nothing printed on the page
NO_TESSERACT = (
    "reading it needs OCR, and Tesseract is not installed (apt-get install tesseract-ocr), "
    "or set INGEST_OCR=off to skip scans"
)


class TesseractMissing(ProcessingError):
    """A page with something printed on it, and no Tesseract to read it (NO_TESSERACT)."""

    def __init__(self) -> None:
        super().__init__(NO_TESSERACT)


@dataclass(frozen=True)
class OcrOptions:
    """INGEST_OCR (auto: on when Tesseract is found | off), INGEST_OCR_LANGUAGES,
    INGEST_OCR_MAX_PAGES; the time budget is the worker's, inside its parse timeout."""

    enabled: bool = True
    languages: str = "eng"
    max_pages: int = 200
    time_budget_seconds: float | None = None


DEFAULT_OCR = OcrOptions()
# OCR stops at this share of the parse timeout, so a long scan ends indexed as far as it
# was read (with a note) rather than killed with nothing.
PARSE_TIMEOUT_SHARE = 0.8


def ocr_from_settings(settings: Settings) -> OcrOptions:
    return OcrOptions(
        enabled=settings.ocr != "off",
        languages=settings.ocr_languages,
        max_pages=settings.ocr_max_pages,
        time_budget_seconds=settings.parse_timeout_seconds * PARSE_TIMEOUT_SHARE,
    )


@dataclass
class OcrResult:
    texts: list[str]  # one per page read (a blank page reads as "")
    notes: list[str] = field(default_factory=list)


@functools.cache
def tesseract_found() -> bool:
    return shutil.which(pytesseract.pytesseract.tesseract_cmd) is not None


def read_pages(pages: Sequence[Callable[[], Image.Image]], options: OcrOptions, *, what: str = "pages") -> OcrResult:
    """The text of the pages, in order, until a limit stops the reading (noted). Raises
    TesseractMissing at the first page with print on it when Tesseract is not installed."""
    result = OcrResult([])
    deadline = None if options.time_budget_seconds is None else time.monotonic() + options.time_budget_seconds
    for index, render in enumerate(pages):
        if index == options.max_pages:
            result.notes.append(
                f"OCR stopped after {index:,} of {len(pages):,} {what} (INGEST_OCR_MAX_PAGES={options.max_pages})"
            )
            break
        remaining = None if deadline is None else deadline - time.monotonic()
        text = None if remaining is not None and remaining <= 0 else _read(render(), options, remaining)
        if text is None:
            result.notes.append(
                f"OCR stopped after {index:,} of {len(pages):,} {what}: the parse time limit "
                "(INGEST_PARSE_TIMEOUT_SECONDS) was nearly spent"
            )
            break
        result.texts.append(text)
    return result


def _read(image: Image.Image, options: OcrOptions, remaining: float | None) -> str | None:
    """A page's text; None when Tesseract ran out of time."""
    with image:
        grey = image.convert("L")
    with grey:
        darkest, lightest = grey.getextrema()  # one band: (min, max) grey levels
        if float(lightest) - float(darkest) < _BLANK_CONTRAST:  # type: ignore[arg-type]
            return ""
        if not tesseract_found():
            raise TesseractMissing
        try:
            return str(pytesseract.image_to_string(grey, lang=options.languages, timeout=remaining or 0))
        except pytesseract.TesseractError as exc:  # a RuntimeError too: caught first
            raise ProcessingError(_tesseract_failure(exc, options.languages)) from None
        except RuntimeError as exc:  # pytesseract's "Tesseract process timeout"
            if "timeout" in str(exc).lower():
                return None
            raise


def _tesseract_failure(exc: pytesseract.TesseractError, languages: str) -> str:
    message = " ".join(str(exc.message).split())
    if "Failed loading language" in message or "Error opening data file" in message:
        packages = " ".join(f"tesseract-ocr-{lang}" for lang in languages.split("+"))
        return f"OCR failed: Tesseract has no data for INGEST_OCR_LANGUAGES={languages} (apt-get install {packages})"
    return f"OCR failed: {message[:200]}"
