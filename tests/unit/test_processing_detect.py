"""Type detection trusts bytes, not names; text decodes from any common encoding."""

from __future__ import annotations

import random

import pytest

from ingestion_pipeline.processing import SUPPORTED_TYPES, ProcessingError, decode_text, detect_type, parse
from tests.fixtures.pdf import make_pdf

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"
ZIP = b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + b"word/document.xml" + bytes(40)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01"
GIF = b"GIF89a\x10\x00\x10\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04"
RANDOM = random.Random(1234).randbytes(4096)


@pytest.mark.parametrize(
    ("content", "name", "expected"),
    [
        (make_pdf(["a pdf"]), "report.pdf", "application/pdf"),
        (make_pdf(["a pdf named as text"]), "report.txt", "application/pdf"),
        (make_pdf(["no name at all"]), "", "application/pdf"),
        (b"<!DOCTYPE html><p>hi</p>", "upload", "text/html"),
        (b"\n  <HTML lang=en><body>hi</body></HTML>", "page.txt", "text/html"),
        (b"\xef\xbb\xbf<head><title>t</title></head>", "noext", "text/html"),
        (b"<!-- saved page --><html><p>x</p></html>", "x", "text/html"),
        (b"<p>a fragment</p>", "fragment.htm", "text/html"),
        (b"<p>a fragment without an html name</p>", "fragment", "text/plain"),
        (b"# Title\n\ntext", "notes.md", "text/markdown"),
        (b"# Title\n\ntext", "NOTES.Markdown", "text/markdown"),
        (b"# Title\n\ntext", "notes.txt", "text/plain"),
        (b"just words", "folder/readme", "text/plain"),
        (b"GIF89a is the name of an image format, and this is text about it.", "gif.txt", "text/plain"),
    ],
)
def test_detects_by_content(content, name, expected):
    assert detect_type(content, name) == expected
    assert expected in SUPPORTED_TYPES


@pytest.mark.parametrize(
    ("content", "what"),
    [(ZIP, "ZIP archive"), (GIF, "GIF image"), (b"\x1f\x8b\x08\x00" + bytes(20), "gzip archive")],
)
def test_known_binary_named_as_text_is_refused_with_what_it_looks_like(content, what):
    with pytest.raises(ProcessingError) as caught:
        detect_type(content, "report.txt")
    assert str(caught.value) == (f"unsupported file type: looks like binary data ({what}) although named report.txt")


@pytest.mark.parametrize(
    ("content", "expected"), [(PNG, "image/png"), (JPEG, "image/jpeg"), (b"II*\x00" + bytes(8), "image/tiff")]
)
def test_images_are_recognised_by_their_bytes_whatever_their_name(content, expected):
    assert detect_type(content, "report.txt") == expected
    assert detect_type(content, "scan.pdf") == expected


def test_png_signature_followed_by_printable_bytes_is_a_damaged_image():
    content = b"\x89PNG\r\n\x1a\n" + b"mostly printable payload " * 20
    assert detect_type(content, "image.txt") == "image/png"
    with pytest.raises(ProcessingError, match=r"^damaged PNG image: "):
        parse(content, "image.txt", max_bytes=10**6)


def test_random_binary_is_refused_naming_the_file():
    with pytest.raises(ProcessingError) as caught:
        detect_type(RANDOM, "notes.txt")
    message = str(caught.value)
    assert message.startswith("unsupported file type: looks like binary data")
    assert "notes.txt" in message


def test_binary_without_nul_bytes_is_refused():
    content = bytes(range(1, 256)) * 8
    with pytest.raises(ProcessingError, match=r"^unsupported file type: looks like binary data"):
        detect_type(content, "data.txt")


def test_binary_with_a_binary_name_says_the_name_plainly():
    with pytest.raises(ProcessingError, match=r"\(ZIP archive\) \(file report\.docx\)$"):
        detect_type(ZIP, "report.docx")


def test_pdf_name_without_pdf_bytes_is_not_a_pdf():
    with pytest.raises(ProcessingError, match=r"^not a PDF: report\.pdf does not start with %PDF-$"):
        detect_type(b"Dear customer, your invoice is attached.", "report.pdf")
    with pytest.raises(ProcessingError, match=r"^not a PDF: .*it looks like a GIF image"):
        detect_type(GIF + bytes(20), "scan.pdf")


def test_pdf_header_after_junk_is_accepted_only_with_a_pdf_name():
    content = b"junk from a mail gateway\r\n" + make_pdf(["text"])
    assert detect_type(content, "mail.pdf") == "application/pdf"
    assert detect_type(b"The header %PDF-1.7 starts every PDF file.", "notes.txt") == "text/plain"


def test_rtf_is_recognised_by_its_bytes():
    assert detect_type(b"{\\rtf1\\ansi\\deff0 {\\fonttbl {\\f0 Times;}} Hello}", "letter.txt") == "application/rtf"


def test_empty_content_has_no_type():
    with pytest.raises(ProcessingError, match=r"^file is empty$"):
        detect_type(b"", "empty.txt")


# --- decoding -------------------------------------------------------------------------

TEXT = "Café crème brûlée à la façon de Noël. Naïve déjà vu, señor."


@pytest.mark.parametrize(
    "content",
    [
        TEXT.encode("utf-8"),
        b"\xef\xbb\xbf" + TEXT.encode("utf-8"),
        TEXT.encode("utf-16"),  # with byte-order mark
        b"\xfe\xff" + TEXT.encode("utf-16-be"),
        TEXT.encode("utf-32"),
        TEXT.encode("latin-1"),
        TEXT.encode("cp1252"),
        TEXT.encode("utf-16-le"),  # no byte-order mark
    ],
    ids=["utf8", "utf8-bom", "utf16-bom", "utf16be-bom", "utf32", "latin1", "cp1252", "utf16le-nobom"],
)
def test_decodes_common_encodings(content):
    assert decode_text(content) == TEXT


def test_cp1252_punctuation_decodes():
    text = "Señor Muñoz paid €20 — “quoted” and ‘single’."
    assert decode_text(text.encode("cp1252")) == text


def test_short_latin1_word_decodes():
    assert decode_text("naïve café".encode("latin-1")) == "naïve café"


def test_other_legacy_encodings_still_decode():
    text = "Zażółć gęślą jaźń, to jest test polskiego tekstu."
    assert decode_text(text.encode("cp1250")) == text


def test_detected_latin1_file_is_text():
    assert detect_type("Résumé: très bien".encode("latin-1"), "cv.txt") == "text/plain"


@pytest.mark.parametrize("content", [RANDOM, b"\x00\x01\x02\x03 text", bytes(range(1, 32)) * 4])
def test_decode_refuses_binary(content):
    with pytest.raises(ProcessingError, match=r"binary data"):
        decode_text(content)


def test_decode_refuses_broken_utf16_after_bom():
    with pytest.raises(ProcessingError, match=r"not valid UTF-16 text"):
        decode_text(b"\xff\xfe" + "ok".encode("utf-16-le") + b"\x00\xd8")  # lone surrogate
