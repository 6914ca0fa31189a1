"""PDF parsing (PDFium, via pypdfium2) on PDFs from tests/fixtures/pdf.py: pages, titles,
what PDFium repairs, and every failure as a ProcessingError with a message a user
understands. Layout (paragraphs, headings, furniture): test_pdf_layout.py."""

from __future__ import annotations

import io
import logging

import pytest
from pypdf import PdfReader, PdfWriter

from ingestion_pipeline.processing import ProcessingError, parse
from ingestion_pipeline.processing.ocr import OcrOptions
from tests.fixtures.pdf import make_pdf

MAX = 10 * 1024 * 1024
PAGES = [
    "Portable pelican document\nPelicans scoop fish with the pouch under their bill.",
    "The second page talks about pelican nests (on islands) and costs 5 € each.",
    "Third page.",
]


def test_pages_and_metadata_title():
    document = parse(make_pdf(PAGES, title="Pelican Report"), "pelican.pdf", max_bytes=MAX)
    assert document.mime_type == "application/pdf"
    assert document.title == "Pelican Report"
    assert [p.ordinal for p in document.pages] == [0, 1, 2]
    assert document.pages[0].text.startswith("Portable pelican document\n")
    assert "(on islands) and costs 5 € each." in document.pages[1].text
    assert [(s.heading, s.level, s.page_ordinal) for s in document.sections] == [
        (None, 1, 0),
        (None, 1, 1),
        (None, 1, 2),
    ]
    assert [s.text for s in document.sections] == [p.text for p in document.pages]


def test_unicode_metadata_title():
    document = parse(make_pdf(["text"], title="Pélican Ünïcode"), "u.pdf", max_bytes=MAX)
    assert document.title == "Pélican Ünïcode"


@pytest.mark.parametrize("title", [None, "", "   "])
def test_title_falls_back_to_first_short_line(title):
    document = parse(make_pdf(PAGES, title=title), "pelican.pdf", max_bytes=MAX)
    assert document.title == "Portable pelican document"


def test_blank_pages_keep_their_numbers():
    """A hit's page is the PDF's page: blank pages are not dropped, or every page after one
    would be named one page too early (issue 59)."""
    document = parse(make_pdf(["", "first text", "   ", "second text"]), "gaps.pdf", max_bytes=MAX)
    assert [(p.ordinal, p.text) for p in document.pages] == [(0, ""), (1, "first text"), (2, ""), (3, "second text")]
    assert [(s.ordinal, s.page_ordinal) for s in document.sections] == [(0, 1), (1, 3)]


def test_pdf_named_as_text_is_parsed_as_pdf():
    document = parse(make_pdf(PAGES), "pelican.txt", max_bytes=MAX)
    assert document.mime_type == "application/pdf"
    assert len(document.pages) == 3


def test_pdf_without_text_layer():
    with pytest.raises(ProcessingError, match=r"^no text could be extracted \(scanned PDF without a text layer\?\)$"):
        parse(make_pdf(["", ""]), "scan.pdf", max_bytes=MAX)


@pytest.mark.parametrize(
    "content",
    [
        make_pdf(PAGES)[:700],  # an interrupted upload
        make_pdf(PAGES)[:-200],
        b"%PDF-1.4\n" + bytes(range(256)) * 8,  # garbage after the header
        b"%PDF-",
    ],
    ids=["truncated-early", "truncated-late", "garbage", "header-only"],
)
def test_truncated_or_garbage_pdf(content):
    with pytest.raises(ProcessingError) as caught:
        parse(content, "broken.pdf", max_bytes=MAX)
    assert str(caught.value) == "corrupt PDF: the file is truncated or damaged (it has no %%EOF end marker)"


def test_damaged_cross_reference_table_is_rebuilt():
    # PDFium rebuilds a broken cross-reference table from the objects themselves.
    content = make_pdf(PAGES).replace(b"xref\n0 ", b"xrof\n0 ")
    assert parse(content, "repaired.pdf", max_bytes=MAX).pages[0].text.startswith("Portable pelican")


def test_garbage_with_an_end_marker():
    with pytest.raises(ProcessingError, match=r"^corrupt PDF: "):
        parse(b"%PDF-1.4\nnot really a pdf at all\n%%EOF\n", "broken.pdf", max_bytes=MAX)


def test_damaged_page_content_costs_that_page_only():
    content = make_pdf(PAGES).replace(b"BT", b"BT [[[<<", 1)
    document = parse(content, "damaged.pdf", max_bytes=MAX, ocr=OcrOptions(enabled=False))
    assert [page.text for page in document.pages] == ["", PAGES[1], PAGES[2]]
    assert document.notes == ("1 page without a text layer not read: INGEST_OCR=off",)


def test_wrong_xref_offsets_are_repaired():
    content = make_pdf(PAGES)
    first_entry = content.index(b"0000000015 00000 n")  # object 1 sits right after the header
    content = content[:first_entry] + b"0000000999" + content[first_entry + 10 :]
    assert parse(content, "repaired.pdf", max_bytes=MAX).pages[0].text.startswith("Portable pelican")


def encrypted(user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(PAGES, title="Secret"))))
    # RC4 works without the optional 'cryptography' package (AES needs it).
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_encrypted_pdf_needing_a_password():
    with pytest.raises(ProcessingError, match=r"^encrypted PDF"):
        parse(encrypted("secret"), "locked.pdf", max_bytes=MAX)


def test_encrypted_pdf_with_empty_user_password_opens():
    document = parse(encrypted(""), "restricted.pdf", max_bytes=MAX)
    assert document.title == "Secret"
    assert document.pages[0].text.startswith("Portable pelican document")


def test_wrong_startxref_is_repaired_without_log_noise(caplog):
    content = make_pdf(PAGES)
    pointer = content[content.rindex(b"startxref\n") :]
    content = content.replace(pointer, b"startxref\n5\n%%EOF\n")
    caplog.set_level(logging.DEBUG)
    assert parse(content, "repaired.pdf", max_bytes=MAX).pages[0].text.startswith("Portable")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_header_after_junk_parses_when_named_pdf():
    content = b"junk from a mail gateway\r\n" + make_pdf(PAGES)
    assert parse(content, "mail.pdf", max_bytes=MAX).pages[0].text.startswith("Portable pelican")


@pytest.mark.parametrize("user_password", ["", "secret"])
def test_aes_encrypted_pdf(user_password):
    """PDFium decrypts AES itself: a copy-restricted PDF opens, a locked one is named."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(PAGES))))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    if user_password:
        with pytest.raises(ProcessingError, match=r"^encrypted PDF: it needs a password to open$"):
            parse(out.getvalue(), "locked.pdf", max_bytes=MAX)
    else:
        assert parse(out.getvalue(), "restricted.pdf", max_bytes=MAX).pages[0].text.startswith("Portable pelican")
