"""PDF: the text of every page as a person reads it (words separated, lines joined into
paragraphs, no running headers, footers or page numbers), cut into sections at the
document's headings (from its outline where it has one, else from its typography), each
section on the PDF page it stands on. Pages without a text layer (scans) are rendered by
PDFium and read by OCR (ocr.py). docs/processing.md shows what a PDF becomes.

Modules: lines (PDFium's text, line by line, with geometry and type; chars: its characters,
words: words it runs together, shifts: word spaces it moves), furniture, headings,
paragraphs; reading (opening, the outline, labels, scans, every failure in plain words).
"""

from __future__ import annotations

from ..document import assemble
from ..model import ParsedDocument
from ..ocr import DEFAULT_OCR, OcrOptions
from .furniture import find_furniture
from .headings import LARGER, body_size, find_headings, title_line
from .paragraphs import sections
from .reading import open_pdf, read_scans


def parse_pdf(content: bytes, ocr: OcrOptions = DEFAULT_OCR) -> ParsedDocument:
    read = open_pdf(content)
    body = body_size(read.pages)
    skip = find_furniture(read.pages, body * LARGER)
    headings = find_headings(read.pages, read.outline, skip, body)
    scanned = [page.index for page in read.pages if not page.lines]
    ocr_texts, notes = read_scans(content, scanned, len(read.pages), ocr) if scanned else ({}, [])
    texts, drafts = sections(read.pages, headings, skip, ocr_texts)
    title = title_line(read.pages, body, skip)
    return assemble(
        "application/pdf",
        texts,
        drafts,
        title=read.title or (read.pages[title[0]].lines[title[1]].text if title else None),
        notes=notes,
        keep_empty_pages=True,
        page_labels=read.labels,
    )
