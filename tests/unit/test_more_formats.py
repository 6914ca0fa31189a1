"""OpenDocument, EPUB, e-mail, CSV/TSV, RTF and scans (OCR by the real Tesseract), parsed
from files written in the test (tests/format_files.py), and each format's limits."""

from __future__ import annotations

import io
import struct
import zlib

import pytesseract
import pytest
from PIL import Image

from ingestion_pipeline.processing import OcrOptions, ProcessingError, chunk_sections, format_name, parse
from ingestion_pipeline.processing import ocr as ocr_module
from tests.fixtures.pdf import make_pdf
from tests.format_files import eml_bytes, epub_bytes, odf_package, odp_bytes, ods_bytes, odt_bytes, page_image
from tests.tools import require_tools

MAX = 10 * 2**20


@pytest.fixture
def needs_tesseract():
    require_tools(["tesseract"], "OCR")


def sections(document):
    return [(s.heading, s.level, s.page_ordinal, s.text) for s in document.sections]


def test_odt_headings_lists_and_tables():
    document = parse(odt_bytes(), "guide.odt", max_bytes=MAX)
    assert document.mime_type == "application/vnd.oasis.opendocument.text"
    assert document.title == "Replication"
    assert sections(document) == [
        ("Replication", 1, 0, "Replication\n\nA standby replays WAL shipped by the primary named amber-falcon."),
        (
            "Slots",
            2,
            0,
            "Slots\n\nslot one\nslot two\n\n| Setting | Value |\n| --- | --- |\n| max_wal_senders | 10 |",
        ),
    ]


def test_ods_repeats_are_bounded_and_empty_repeats_ignored():
    document = parse(ods_bytes(repeated_rows=5000), "quotas.ods", max_bytes=MAX)
    [(heading, _, page, text)] = sections(document)
    assert heading == "Quotas" and page == 0
    lines = text.splitlines()
    assert lines[:3] == ["| Tenant | Quota |", "| --- | --- |", "| same | same |"]
    # a filled row repeated 5,000 times is written 100 times; the empty ones never
    assert lines.count("| same | same |") == 100 and set(lines) == {*lines[:3]}


def test_odp_slides_are_pages_with_titles_and_notes():
    document = parse(odp_bytes(), "deck.odp", max_bytes=MAX)
    assert document.title == "Roadmap"
    assert sections(document) == [
        ("Roadmap", 1, 0, "Roadmap\n\nPartitioning lands in the cobalt-heron release.\n\nSpeaker: mention pruning."),
        ("Slide 2", 1, 1, "Questions"),
    ]


def test_epub_chapters_in_spine_order():
    document = parse(epub_bytes(), "guide.epub", max_bytes=MAX)
    assert document.mime_type == "application/epub+zip"
    assert document.title == "Operations Guide"
    assert [(h, p) for h, _, p, _ in sections(document)] == [("Backups", 0), ("Restores", 1)]
    assert "violet-marsh" in document.pages[1].text


def test_epub_without_chapters_fails_in_one_line():
    with pytest.raises(ProcessingError, match=r"^damaged EPUB file: the package's spine lists no chapters$"):
        parse(epub_bytes(spine=False), "empty.epub", max_bytes=MAX)


def test_eml_html_body_headers_and_attachment_sections():
    document = parse(eml_bytes(), "report.eml", max_bytes=MAX)
    assert document.mime_type == "message/rfc822" and document.title == "Vacuum report"
    got = sections(document)
    assert got[0][0] == "Vacuum report" and "From: Ana <ana@example.com>" in got[0][3]
    assert got[1][:3] == ("Findings", 2, 0) and "copper-lynx table" in got[1][3]
    assert [h for h, *_ in got[2:]] == ["Attachment: bloat.md", "Bloat"]
    assert got[3][2] == 1  # the attachment's page follows the message's
    assert document.notes == ()
    assert parse(eml_bytes(), "no-suffix", max_bytes=MAX).mime_type == "message/rfc822"


def test_eml_attachments_past_the_limit_are_named_in_a_note():
    document = parse(eml_bytes(attachments=130), "many.eml", max_bytes=MAX)
    assert sum(1 for s in document.sections if (s.heading or "").startswith("Attachment: ")) == 100
    [note] = document.notes
    assert note.startswith("30 attachments not indexed: over the limit of 100 per message (n100.txt, n101.txt")
    assert note.endswith("and 10 more)")


def test_csv_and_tsv_are_tables_under_their_header():
    document = parse(b"plan;price\npremium;25\nbasic;10\n", "prices.csv", max_bytes=MAX)
    assert document.mime_type == "text/csv"
    assert document.sections[0].text == "| plan | price |\n| --- | --- |\n| premium | 25 |\n| basic | 10 |"
    tsv = parse(b"host\trole\ndb1\tprimary|main\n", "hosts.tsv", max_bytes=MAX)
    assert tsv.sections[0].text == "| host | role |\n| --- | --- |\n| db1 | primary\\|main |"


def test_rtf_becomes_text():
    content = rb"{\rtf1\ansi{\fonttbl{\f0 Helvetica;}}{\pard\b Archiving\par}{\pard Keep WAL for caf\'e9 days.\par}}"
    document = parse(content, "memo.rtf", max_bytes=MAX)
    assert document.mime_type == "application/rtf"
    assert document.sections[0].text == "Archiving\nKeep WAL for café days."


@pytest.mark.usefixtures("needs_tesseract")
@pytest.mark.parametrize(("image_format", "mime_type"), [("PNG", "image/png"), ("JPEG", "image/jpeg")])
def test_images_are_read_by_ocr(image_format, mime_type):
    content = page_image(["The checkpointer flushes dirty buffers", "every five minutes."], image_format=image_format)
    document = parse(content, f"scan.{image_format.lower()}", max_bytes=MAX)
    assert document.mime_type == mime_type
    assert " ".join(document.pages[0].text.split()) == "The checkpointer flushes dirty buffers every five minutes."


@pytest.mark.usefixtures("needs_tesseract")
def test_tiff_frames_are_pages_and_ocr_stops_at_max_pages():
    frames = [Image.open(io.BytesIO(page_image([f"Frame number {word}"]))) for word in ("alpha", "bravo", "charlie")]
    buffer = io.BytesIO()
    frames[0].save(buffer, "TIFF", save_all=True, append_images=frames[1:])
    document = parse(buffer.getvalue(), "pages.tiff", max_bytes=MAX, ocr=OcrOptions(max_pages=2))
    assert [p.text for p in document.pages] == ["Frame number alpha", "Frame number bravo"]
    assert document.notes == ("OCR stopped after 2 of 3 pages (INGEST_OCR_MAX_PAGES=2)",)


def test_blank_pages_never_reach_tesseract(monkeypatch):
    # /bin/false as Tesseract: any page sent to it would fail the document with "OCR failed".
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/bin/false")
    ocr_module.tesseract_found.cache_clear()
    try:
        blank = Image.new("L", (800, 1000), 250)
        buffer = io.BytesIO()
        blank.save(buffer, "PNG")
        with pytest.raises(ProcessingError, match=r"^no text could be extracted$"):
            parse(buffer.getvalue(), "blank.png", max_bytes=MAX)
    finally:
        ocr_module.tesseract_found.cache_clear()


def test_without_tesseract_a_scan_fails_saying_how_to_get_it(monkeypatch):
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    ocr_module.tesseract_found.cache_clear()
    with Image.open(io.BytesIO(page_image(["words"]))) as image:
        scan = io.BytesIO()
        image.save(scan, "PDF", resolution=150)  # the page an image, no text layer
    try:
        with pytest.raises(ProcessingError, match=r"^a PNG image: .*apt-get install tesseract-ocr.*INGEST_OCR=off"):
            parse(page_image(["words"]), "scan.png", max_bytes=MAX)
        with pytest.raises(ProcessingError, match=r"^a scanned PDF: .*apt-get install tesseract-ocr"):
            parse(scan.getvalue(), "scan.pdf", max_bytes=MAX)
        # What needs no reading fails as it does with Tesseract: a blank scan is blank, a damaged image damaged.
        with pytest.raises(ProcessingError, match=r"^no text could be extracted \(scanned PDF without a text layer"):
            parse(make_pdf(["", ""]), "blank.pdf", max_bytes=MAX)
        with pytest.raises(ProcessingError, match=r"^damaged PNG image: "):
            parse(page_image(["words"])[:300], "cut.png", max_bytes=MAX)
        mixed = parse(make_pdf(["A page with a text layer.", ""]), "mixed.pdf", max_bytes=MAX)
        assert mixed.pages[0].text == "A page with a text layer."
    finally:
        ocr_module.tesseract_found.cache_clear()


def test_ocr_off_fails_images_and_notes_skipped_pdf_pages():
    off = OcrOptions(enabled=False)
    with pytest.raises(ProcessingError, match=r"INGEST_OCR=off"):
        parse(page_image(["words"]), "scan.png", max_bytes=MAX, ocr=off)
    document = parse(make_pdf(["A page with a text layer.", ""]), "mixed.pdf", max_bytes=MAX, ocr=off)
    assert [p.text for p in document.pages] == ["A page with a text layer.", ""]
    assert document.notes == ("1 page without a text layer not read: INGEST_OCR=off",)


@pytest.mark.usefixtures("needs_tesseract")
def test_missing_language_data_names_the_package():
    with pytest.raises(ProcessingError, match=r"apt-get install tesseract-ocr-zzz\)$"):
        parse(page_image(["words"]), "scan.png", max_bytes=MAX, ocr=OcrOptions(languages="zzz"))


def png_header(width: int, height: int) -> bytes:
    """A PNG that claims the size: its header, one empty data chunk, its end."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


@pytest.mark.usefixtures("needs_tesseract")
@pytest.mark.parametrize("size", [(20_000, 20_000), (9_000, 8_000)])
def test_an_image_past_the_pixel_bound_fails_before_decoding(size):
    with pytest.raises(ProcessingError, match=r"megapixel limit: a decompression bomb\?$"):
        parse(png_header(*size), "huge.png", max_bytes=MAX)


def test_encrypted_office_files_say_password_protected():
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500) + "EncryptedPackage".encode("utf-16-le") + bytes(100)
    with pytest.raises(ProcessingError, match=r"^password protected: "):
        parse(ole, "budget.xlsx", max_bytes=MAX)
    manifest = (
        "<manifest:manifest><manifest:file-entry><manifest:encryption-data/></manifest:file-entry></manifest:manifest>"
    )
    odt = odf_package("application/vnd.oasis.opendocument.text", "<office:text/>", manifest=manifest)
    with pytest.raises(ProcessingError, match=r"^password protected: the ODT file is encrypted"):
        parse(odt, "secret.odt", max_bytes=MAX)


def test_entities_in_opendocument_are_refused():
    bomb = '<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    odt = odf_package(
        "application/vnd.oasis.opendocument.text", "<office:text><text:p>&b;</text:p></office:text>", prolog=bomb
    )
    with pytest.raises(ProcessingError, match=r"^refused ODT file: its XML declares entities or a DTD"):
        parse(odt, "bomb.odt", max_bytes=MAX)


def test_format_names():
    assert format_name("application/vnd.oasis.opendocument.presentation") == "ODP"
    assert format_name("image/tiff") == "TIFF"
    assert format_name("message/rfc822") == "e-mail"
    assert format_name(None) == "unrecognised"


def test_every_chunk_of_a_long_table_carries_its_header():
    rows = ["plan,monthly price,region", *(f"plan{i},{i},eu-west-{i % 3}" for i in range(400))]
    document = parse("\n".join(rows).encode(), "plans.csv", max_bytes=MAX)
    chunks = chunk_sections(document.sections)
    assert len(chunks) > 5
    assert all("| plan | monthly price | region |" in chunk.text for chunk in chunks)
    # and every row is there once: the header repeats, the rows do not
    assert sum(document.sections[0].text.count(f"| plan{i} |") for i in range(400)) == 400
