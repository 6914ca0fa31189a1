"""A job's error is printable text, whatever the parser quoted (issue 61): the bytes a library
copies from a damaged file into its message (`b'\\xcb'`), escaped and control characters and
line breaks become one line a person can read, for every format, on the job and on its stage
log; and a ZIP package whose compressed bytes are damaged fails as a damaged file, at once."""

from __future__ import annotations

import io
import zipfile

import pytest

from ingestion_pipeline.processing import ProcessingError
from ingestion_pipeline.worker import Worker
from ingestion_pipeline.worker.errors import ERROR_TEXT_LIMIT, printable
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import seed_batch, seed_document

# What pypdf said of a scrambled PDF (the report), and what other libraries say.
SCRAMBLED_PDF = (
    "corrupt PDF: Invalid Elementary Object starting with b'\\xcb' @1183: b'y) \\xe1>\\xf9en\\xc0obj\\n<< /Type'"
)


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        (SCRAMBLED_PDF, "corrupt PDF: Invalid Elementary Object starting with [1 byte] @1183: [21 bytes]"),
        ('damaged DOCX file: b"\\x00\\x01 cut short', "damaged DOCX file: [bytes]"),
        (
            "bad header 'PK\\x03\\x04' in member\nTraceback line\x00\x1b[31m",
            "bad header 'PK?' in member Traceback line?[31m",
        ),
        ("text \ufffd\ufffd decoded wrongly\x85", "text ? decoded wrongly"),
        ("Bob's file b'ab' is not Bob's", "Bob's file [2 bytes] is not Bob's"),
    ],
)
def test_an_error_is_one_line_of_printable_text(message, shown):
    assert printable(message) == shown
    assert printable("x" * 5000).endswith("…") and len(printable("x" * 5000)) == ERROR_TEXT_LIMIT


def failed_job(conn, document_id) -> dict:
    return conn.execute(
        "select status, attempt_count, error_message from ingestion_jobs where document_id = %s", (document_id,)
    ).fetchone()


def seed_job_of(conn, content: bytes, name: str):
    batch_id = seed_batch(conn)
    document_id = seed_document(conn, batch_id, content=content, name=name)
    assert AnySchemaRpc(conn).enqueue(document_id, batch_id=batch_id, kind="index", max_attempts=3).ok
    return document_id


def test_a_parsers_bytes_never_reach_the_jobs_error_or_its_stage_log(pool, settings, conn):
    document_id = seed_job_of(conn, b"any bytes", "scrambled.pdf")

    def scrambled(run):
        with run.stage("parse", 10):
            raise ProcessingError(SCRAMBLED_PDF + "\n  and a second line \x07")

    report = Worker(pool, settings, processor=scrambled).run(drain=True)
    assert report.counts["failed"] == 1
    row = failed_job(conn, document_id)
    assert row["status"] == "failed" and row["attempt_count"] == 1
    assert row["error_message"] == (
        "corrupt PDF: Invalid Elementary Object starting with [1 byte] @1183: [21 bytes] and a second line ?"
    )
    logged = conn.execute(
        "select detail->>'error' as error from ingestion_job_stages where job_id = "
        "(select id from ingestion_jobs where document_id = %s) and stage = 'parse'",
        (document_id,),
    ).fetchone()
    assert logged["error"].startswith("ProcessingError: corrupt PDF: Invalid Elementary Object starting with [1 byte]")
    assert [result.message for result in report.results] == [row["error_message"]]


def test_an_unexpected_errors_bytes_are_said_too(pool, settings, conn):
    document_id = seed_job_of(conn, b"any bytes", "odd.bin")

    def library_bug(run):
        raise ValueError(f"unexpected token {bytes([0xFE, 0xFF, 0])!r} at offset 7")

    Worker(pool, settings, processor=library_bug).run(drain=True)
    row = failed_job(conn, document_id)
    assert row["status"] == "failed" and row["attempt_count"] == 3  # retried: not known to be permanent
    assert row["error_message"] == "ValueError: unexpected token [3 bytes] at offset 7"


def damaged_docx() -> bytes:
    """A DOCX whose [Content_Types].xml member's compressed bytes are damaged: zlib refuses it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml", "<Types>" + "<Override PartName='/word/document.xml'/>" * 200 + "</Types>"
        )
        archive.writestr("word/document.xml", "<w:document/>")
    data = bytearray(buffer.getvalue())
    start = data.index(b"[Content_Types].xml") + len("[Content_Types].xml")
    data[start + 10 : start + 30] = b"\xff" * 20
    return bytes(data)


def test_a_docx_whose_compressed_bytes_are_damaged_fails_at_once_in_one_line(pool, settings, conn):
    document_id = seed_job_of(conn, damaged_docx(), "report.docx")
    Worker(pool, settings, parse_processes=0).run(drain=True)
    row = failed_job(conn, document_id)
    assert row["status"] == "failed" and row["attempt_count"] == 1, row  # permanent: not retried
    assert row["error_message"].isprintable() and "\n" not in row["error_message"]


def test_a_librarys_bytes_never_reach_a_parsers_message_or_a_note():
    """The same words where a parser makes them: a library's error in a damaged file's
    message, and an attachment's failure in its e-mail's notes (`ingest show`)."""
    from email.message import EmailMessage

    from ingestion_pipeline.processing.email_message import parse_eml
    from ingestion_pipeline.processing.parse import _library_errors

    def broken():
        raise ValueError(f"bad token {bytes([0xCB, 0])!r} at 7\nnext line")

    with pytest.raises(ProcessingError) as raised:
        _library_errors("DOCX", broken)
    assert str(raised.value) == "damaged DOCX file: bad token [2 bytes] at 7 next line"

    message = EmailMessage()
    message["Subject"] = "minutes"
    message.set_content("The minutes are attached.")
    message.add_attachment(b"%PDF-1.7 scrambled", maintype="application", subtype="pdf", filename="minutes.pdf")

    def unreadable(content, name):
        raise ProcessingError(SCRAMBLED_PDF)

    notes = parse_eml(message.as_bytes(), unreadable).notes
    assert list(notes) == [
        "attachment minutes.pdf not indexed: corrupt PDF: Invalid Elementary Object starting with [1 byte] @1183: "
        "[21 bytes]"
    ]
