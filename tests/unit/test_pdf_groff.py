"""A groff man page printed through Ghostscript (groff -Tps | ps2pdf: how Debian's man pages
become PDFs): PDFium alone runs words together after an f-ligature and in tight justified
lines ("groffstands", "roffand", "grofflanguage"); the reader separates them by the gap
between their letters (issue 59). Needs groff and Ghostscript (.ci/run installs them)."""

from __future__ import annotations

import subprocess

import pypdfium2 as pdfium
import pytest

from ingestion_pipeline.processing import parse
from tests.tools import require_tools

PAGE = b""".TH GROFF 7
.SH DESCRIPTION
The name groff stands for GNU roff and is the free implementation of the roff type-setting system.
See roff(7) for a survey and the background of the groff system.
This document provides only short descriptions of roff language elements.
So in GNU, the terms roff, troff, and groff language could be used as synonyms.
"""


@pytest.fixture
def man_page_pdf() -> bytes:
    require_tools(["groff", "ps2pdf"], "a man page's PDF")
    postscript = subprocess.run(["groff", "-man", "-Tps"], input=PAGE, capture_output=True, check=True).stdout
    return subprocess.run(["ps2pdf", "-", "-"], input=postscript, capture_output=True, check=True).stdout


def test_words_pdfium_runs_together_are_separated(man_page_pdf: bytes) -> None:
    raw = pdfium.PdfDocument(man_page_pdf)[0].get_textpage().get_text_range()
    assert "groffstands" in raw or "roffand" in raw  # what PDFium alone reads
    text = " ".join(parse(man_page_pdf, "groff.7.pdf", max_bytes=10**7).pages[0].text.split())
    for words in (
        "groff stands",
        "GNU roff and",
        "roff type-setting",
        "groff system",
        "roff language elements",
        "groff language could",
    ):
        assert words in text


MORE = b"""Control lines represent commands, optionally with arguments.
They have the following syntax.
The registers and strings are defined and written by the user.
See groff(1) on how to invoke this.
.bp
You can give it a list of variable names as arguments.
This is handled specially by pic since they can deal with text strings.
"""


def _pdf(source: bytes) -> bytes:
    require_tools(["groff", "ps2pdf"], "a man page's PDF")
    postscript = subprocess.run(["groff", "-man", "-Tps"], input=source, capture_output=True, check=True).stdout
    return subprocess.run(["ps2pdf", "-", "-"], input=postscript, capture_output=True, check=True).stdout


def test_a_space_glyph_between_touching_letters_is_no_space() -> None:
    """Ghostscript sets a space glyph inside a kerned word and moves the pen back over it:
    PDFium reads "hav e", "inv oke"; on a page where PDFium runs words together, a space
    between two letters that touch is dropped."""
    pdf = _pdf(PAGE + MORE)
    raw = pdfium.PdfDocument(pdf)[0].get_textpage().get_text_range()
    assert "hav e" in raw and "inv oke" in raw
    text = " ".join(parse(pdf, "groff.7.pdf", max_bytes=10**7).pages[0].text.split())
    assert "They have the following syntax" in text
    assert "how to invoke this" in text
    assert "groff stands" in text  # and what runs together is still separated


def test_pages_after_pages_whose_words_run_together_have_every_word_measured() -> None:
    """The second page has no long word run together, only short ones ("italist",
    "theycan"): it is measured letter by letter because most pages before it needed it."""
    pdf = _pdf(PAGE + MORE)
    raw = pdfium.PdfDocument(pdf)[1].get_textpage().get_text_range()
    assert "italist" in raw and "theycan" in raw
    text = " ".join(parse(pdf, "groff.7.pdf", max_bytes=10**7).pages[1].text.split())
    assert "give it a list of variable names" in text
    assert "since they can deal with" in text
