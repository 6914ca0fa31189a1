"""Files built to hurt the format parsers (tests/fixtures/hostile_formats.py), in one batch
with ordinary documents, through the real `ingest work --drain` in a subprocess under the
parsing children's limits: each hostile file ends failed with its one-line reason (the
email: indexed, with a note on the attachments it left out), the ordinary documents index,
nothing is left pending or processing, and no process of the worker grows past the memory
bound."""

from __future__ import annotations

import email
import email.policy
import io
import json
import os
import re
import resource
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import olefile
import pypdf
import pytest
from openpyxl import load_workbook
from PIL import Image

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.settings import Settings
from tests.fixtures.hostile_formats import (
    GIB,
    HOSTILE_FORMATS,
    attachment_phrase,
    huge_png,
    huge_shared_strings_xlsx,
    normal_phrase,
    write_hostile_formats,
    write_normal_documents,
)

INGEST = Path(sys.executable).parent / "ingest"
MEMORY_MB = 1024  # INGEST_PARSE_MEMORY_MB: each parsing child's address space
TIMEOUT_SECONDS = 60  # INGEST_PARSE_TIMEOUT_SECONDS
MAX_FILE_BYTES = 50 * 2**20  # INGEST_MAX_FILE_BYTES (the default): archives may expand to 20x, 1,000 MB
NORMAL_DOCUMENTS = 20
EMAIL = "thousand-attachments.eml"
ATTACHMENTS_INDEXED = 100

# What each hostile file fails with: its own reason, found before the file is expanded,
# never one of the limits that stop a parser which did expand it.
EXPECTED_FAILURES = {
    "entity-bomb.docx": r"^refused DOCX file: its XML declares entities or a DTD \(an entity bomb\?\)$",
    "entity-bomb.xlsx": r"^refused XLSX file: its XML declares entities or a DTD \(an entity bomb\?\)$",
    "entity-bomb.odt": r"^refused ODT file: its XML declares entities or a DTD \(an entity bomb\?\)$",
    "entity-bomb.epub": r"^refused EPUB file: its XML declares entities or a DTD \(an entity bomb\?\)$",
    "shared-strings-1gib.xlsx": (
        r"expands to 1,024 MB, over the 1,000 MB limit \(20 x INGEST_MAX_FILE_BYTES\): a zip bomb\?$"
    ),
    "encrypted.docx": r"^password protected: ",
    "twenty-thousand-square.png": r"decompression bomb",
    "blank-scans-2000.pdf": r"INGEST_OCR_MAX_PAGES",
}
LIMIT_MESSAGES = r"parsing took longer than|parsing needed more than|the process parsing the document died"

# Runs the worker (its arguments after the first) and writes to the first argument the peak
# resident set, in KiB, of the worker and every process under it. RUSAGE_CHILDREN's
# ru_maxrss is not a sum: it is the largest peak among the descendants that were *waited
# for* (each reaped child carries its own peak and the largest of those it reaped). The
# parsing children are forked, and reaped, by multiprocessing's fork server, but the worker
# does not wait for its fork server: it outlives the worker by a moment and would be reaped
# by init, its children's peaks with it (a child allocating 600 MiB showed as 22 MiB). So
# this process makes itself a child subreaper: the worker's orphans become its children, it
# waits for every one of them, and then its own RUSAGE_CHILDREN covers the whole tree.
# It is a small process of its own, not pytest, because a child's peak includes its
# parent's resident set up to the child's exec: pytest's own RUSAGE_CHILDREN after the run
# is at least pytest's size (printed, and only checked to be at least the tree's peak).
REAPER = """
import ctypes, os, resource, subprocess, sys
PR_SET_CHILD_SUBREAPER = 36
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
    sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}")
code = subprocess.call(sys.argv[2:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The hostile files and the ordinary documents, built once for the module."""
    folder = tmp_path_factory.mktemp("hostile-formats")
    started = time.monotonic()
    sizes = write_hostile_formats(folder)
    write_normal_documents(folder, NORMAL_DOCUMENTS)
    built = ", ".join(f"{name} {size / 1024:,.0f} KiB" for name, size in sizes.items())
    print(f"\nbuilt in {time.monotonic() - started:.1f} s: {built}")
    return folder


def worker_env(db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")}
    env.update(
        DATABASE_URL=db_url,
        INGEST_PARSE_PROCESSES="2",
        INGEST_PARSE_MEMORY_MB=str(MEMORY_MB),
        INGEST_PARSE_TIMEOUT_SECONDS=str(TIMEOUT_SECONDS),
        INGEST_MAX_FILE_BYTES=str(MAX_FILE_BYTES),
    )
    return env


def committed_sections(conn, source_name: str) -> list[str]:
    rows = conn.execute(
        "select s.content from document_sections s join documents d"
        " on d.id = s.document_id and d.index_generation_id = s.index_generation_id"
        " where d.source_name = %s order by s.ordinal",
        (source_name,),
    ).fetchall()
    return [row["content"] for row in rows]


@pytest.mark.one_server  # the worker's processes under limits: the client's subject, run once
def test_hostile_formats_end_within_the_limits_beside_normal_documents(db_url, conn, corpus, tmp_path):
    with make_pool(db_url, Settings(database_url=db_url)) as pool:
        enqueue_paths(pool, [corpus], max_bytes=MAX_FILE_BYTES, max_attempts=1)
    peak_file = tmp_path / "peak-rss-kib"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", REAPER, str(peak_file), str(INGEST), "work", "--drain", "--json"],
        cwd=tmp_path,
        env=worker_env(db_url),
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    peak_kib = int(peak_file.read_text())

    rows = conn.execute(
        "select d.source_name, d.status, j.status as job_status, j.error_message, d.metadata"
        " from documents d join ingestion_jobs j on j.document_id = d.id order by d.source_name"
    ).fetchall()
    documents = {row["source_name"]: row for row in rows}
    print(
        f"\n`ingest work --drain`: {report['claimed']} jobs in {seconds:.1f} s; peak RSS of the worker and its"
        f" parsing children {peak_kib / 1024:.0f} MiB (bound {MEMORY_MB} MiB); this process's RUSAGE_CHILDREN"
        f" ru_maxrss {before / 1024:.0f} MiB before, {after / 1024:.0f} MiB after"
    )
    for name in HOSTILE_FORMATS:
        row = documents.get(name)
        print(f"  {name}: {row and row['status']}: {row and (row['error_message'] or row['metadata'].get('notes'))}")

    normal = [name for name in documents if name.startswith("note-")]
    assert sorted(documents) == sorted([*HOSTILE_FORMATS, *normal]) and len(normal) == NORMAL_DOCUMENTS
    assert report["claimed"] == len(documents), report
    terminal = {("indexed", "completed"), ("failed", "failed")}
    states = {name: (row["status"], row["job_status"]) for name, row in documents.items()}
    assert {name: state for name, state in states.items() if state not in terminal} == {}, "left unfinished"

    # The tree's peak, through pytest's own RUSAGE_CHILDREN too: the reaper was waited for.
    assert after >= peak_kib
    assert peak_kib * 1024 < MEMORY_MB * 2**20, f"peak RSS {peak_kib / 1024:.0f} MiB"

    email = documents[EMAIL]
    assert email["status"] == "indexed", email
    notes = email["metadata"].get("notes") or []
    skipped = 1_000 - ATTACHMENTS_INDEXED  # the fixture has 1,000 attachments
    assert [note for note in notes if f"{skipped} attachments" in note and "enclosure-0100.txt" in note], notes
    sections = "\n".join(committed_sections(conn, EMAIL))
    indexed = {int(n) for n in re.findall(r"wren-ledger-(\d{4})", sections)}
    assert indexed == set(range(ATTACHMENTS_INDEXED)), sorted(indexed)
    assert attachment_phrase(0) in sections and attachment_phrase(999) not in sections
    assert "HTML body" in sections and "Plain body" not in sections  # the HTML alternative is preferred

    for name in normal:
        assert documents[name]["status"] == "indexed", documents[name]
        number = int(re.findall(r"\d+", name)[0])
        assert normal_phrase(number) in "\n".join(committed_sections(conn, name)), name

    # Every hostile file's outcome at once: (status, message) of those not as expected.
    unexpected = {}
    for name, pattern in EXPECTED_FAILURES.items():
        status, message = documents[name]["status"], documents[name]["error_message"] or ""
        one_line = message and "\n" not in message
        if status != "failed" or not one_line or re.search(LIMIT_MESSAGES, message) or not re.search(pattern, message):
            unexpected[name] = (status, message)
    assert unexpected == {}, "hostile files without their expected one-line reason"


def test_the_hostile_files_are_what_they_claim(corpus):
    """The generators, checked without the worker: the archive's 1 GiB is declared, and the
    hand-written ZIP and PNG writers make files the libraries read (at a small scale here;
    full size, zipfile.testzip inflates the 1 GiB with a matching CRC, in ~6 s)."""
    with zipfile.ZipFile(corpus / "shared-strings-1gib.xlsx") as archive:
        assert archive.getinfo("xl/sharedStrings.xml").file_size > GIB
    small = huge_shared_strings_xlsx(expanded=3 * 2**20)
    with zipfile.ZipFile(io.BytesIO(small)) as archive:
        assert archive.testzip() is None
    workbook = load_workbook(io.BytesIO(small), read_only=True)
    assert [len(row[0]) for row in workbook.worksheets[0].iter_rows(values_only=True)] == [2**20 - 16] * 3
    workbook.close()

    png = (corpus / "twenty-thousand-square.png").read_bytes()  # Pillow refuses to open it: its IHDR
    assert png[12:16] == b"IHDR" and struct.unpack(">II", png[16:24]) == (20_000, 20_000)
    with Image.open(io.BytesIO(huge_png(300, 200, rows_per_unit=50))) as image:
        image.load()
        assert (image.size, image.getextrema()) == ((300, 200), (0, 0))

    assert {"EncryptionInfo", "EncryptedPackage"} <= {
        "/".join(entry) for entry in olefile.OleFileIO(str(corpus / "encrypted.docx")).listdir()
    }
    message = email.message_from_bytes((corpus / EMAIL).read_bytes(), policy=email.policy.default)
    assert len(list(message.iter_attachments())) == 1_000
    pdf = pypdf.PdfReader(corpus / "blank-scans-2000.pdf")
    assert len(pdf.pages) == 2_000 and pdf.pages[1_999].extract_text() == ""
