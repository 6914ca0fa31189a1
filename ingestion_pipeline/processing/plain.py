"""Plain text: pages at form feeds, one section per page."""

from __future__ import annotations

from .document import DraftSection, assemble
from .model import ParsedDocument


def parse_plain(text: str) -> ParsedDocument:
    # Form feeds are how text exports (pdftotext, old line printers) mark page ends.
    pages = text.split("\f")
    sections = [DraftSection(None, 1, index, page) for index, page in enumerate(pages)]
    return assemble("text/plain", pages, sections, title=None)
