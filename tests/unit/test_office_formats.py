"""DOCX, XLSX and PPTX parsed by their libraries: headings become sections, slides and sheets
pages, tables Markdown rows under their header; the type is the package's, not the name's;
an archive that would expand past its limit, or whose parts are encrypted or damaged, fails
with one line."""

from __future__ import annotations

import io
import zipfile

import pytest

from ingestion_pipeline.processing import ProcessingError, parse
from ingestion_pipeline.processing.detect import detect_type
from ingestion_pipeline.processing.packages import DOCX, EXPANSION_FACTOR, PPTX, XLSX
from tests.office_files import docx_bytes, pptx_bytes, xlsx_bytes

MB = 1024 * 1024


def test_docx_headings_become_sections_and_tables_rows():
    document = parse(docx_bytes(), "handbook.docx", max_bytes=50 * MB)
    assert document.mime_type == DOCX and document.title == "Backup handbook"
    assert [(s.heading, s.level) for s in document.sections] == [
        ("Continuous archiving", 1),
        ("Recovery targets", 2),
    ]
    recovery = document.sections[1].text
    assert "saffron-heron" in recovery and "Check the timeline first" in recovery
    assert "| Setting | Value |\n| --- | --- |\n| archive_timeout | 60s |" in recovery
    assert len(document.pages) == 1 and "Continuous archiving" in document.pages[0].text


def test_xlsx_sheets_become_pages_with_their_header():
    document = parse(xlsx_bytes(), "prices.xlsx", max_bytes=50 * MB)
    assert document.mime_type == XLSX
    assert [s.heading for s in document.sections] == ["Prices", "Regions"]
    assert [s.page_ordinal for s in document.sections] == [0, 1]
    assert "| Plan | Monthly price | Seats |" in document.pages[0].text
    assert "| Premium | 25 | 10 |" in document.pages[0].text
    assert "| Europe | marigold-falls |" in document.pages[1].text


def test_pptx_slides_become_pages_headed_by_their_titles():
    document = parse(pptx_bytes(), "review.pptx", max_bytes=50 * MB)
    assert document.mime_type == PPTX and document.title == "Quarterly review"
    assert [s.heading for s in document.sections] == ["Quarterly review", "Roadmap", "Figures"]
    assert len(document.pages) == 3
    figures = document.sections[2].text
    assert "| Metric | Value |" in figures and "| Churn | 2% |" in figures
    assert "Mention the churn target." in figures
    assert "lighthouse-cobalt" in document.sections[1].text


def test_the_package_decides_the_type_not_the_name():
    assert detect_type(docx_bytes(), "misnamed.txt") == DOCX
    assert detect_type(xlsx_bytes(), "") == XLSX
    plain_zip = io.BytesIO()
    with zipfile.ZipFile(plain_zip, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(ProcessingError, match="ZIP archive"):
        parse(plain_zip.getvalue(), "notes.zip", max_bytes=50 * MB)


def test_an_archive_that_expands_past_its_limit_is_refused_unread():
    bomb = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(docx_bytes())) as source,
        zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        for item in source.infolist():
            archive.writestr(item, source.read(item))
        archive.writestr("word/media/padding.bin", b"\0" * (3 * MB))
    max_bytes = bomb.tell() * 2  # the upload is small; what it expands to is not
    assert EXPANSION_FACTOR * max_bytes < 3 * MB
    with pytest.raises(ProcessingError, match=r"expands to .* MB, over the .* limit .*zip bomb"):
        parse(bomb.getvalue(), "bomb.docx", max_bytes=max_bytes)


def test_a_damaged_part_fails_with_one_line():
    damaged = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(docx_bytes())) as source, zipfile.ZipFile(damaged, "w") as archive:
        for item in source.infolist():
            data = b"<w:document" if item.filename == "word/document.xml" else source.read(item)
            archive.writestr(item, data)
    with pytest.raises(ProcessingError, match=r"^damaged DOCX file: ") as error:
        parse(damaged.getvalue(), "damaged.docx", max_bytes=50 * MB)
    assert "\n" not in str(error.value)
