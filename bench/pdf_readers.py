"""The PDF readers bench/pdf_quality.py compares, each run on one PDF in a child process of its
own (this file as a script), which reports the reader's text, the CPU seconds of the parse
alone and the peak RSS.

  this project       ingestion_pipeline.processing.parse(content, name, max_bytes=size + 1):
                     its pages, its sections (the scored text is the sections' texts joined in
                     order) and its chunks (chunk_spans with the chunking the settings give)
  pdftotext          poppler's pdftotext, default (reading order) mode, UTF-8, one text per
                     page (split at form feeds)
  pdftotext -layout  the same with -layout
  pdfminer.six       pdfminer.high_level.extract_text, default LAParams, split at form feeds
  pypdfium2          per page: PdfPage.get_textpage().get_text_range()

CPU: for the Python readers the child's time.process_time() around the call plus the CPU of
the children it waited for meanwhile (OCR's Tesseract), the reader's modules imported before
the clock starts; for pdftotext the pdftotext process's own user + system time (os.wait4).
Peak RSS: the child's VmHWM after the parse (Python readers: the interpreter and its imports
included, `rest_kb` says how much of it was there before the parse); for pdftotext its
ru_maxrss from os.wait4, which starts at the RSS of the small Python child that forked it (so
an upper bound, a few MB over).
"""

from __future__ import annotations

import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OURS = "this project"
ANCHORS = ("pdftotext", "pdftotext -layout", "pdfminer.six", "pypdfium2")
READERS = (OURS, *ANCHORS)
MEMORY_CAP = 8 << 30  # address space of a reading child


@dataclass
class Reading:
    reader: str
    pages: list[str] = field(default_factory=list)  # anchors: per PDF page; ours: its pages
    page_numbers: list[int] = field(default_factory=list)  # the page each of `pages` names, from 1
    text: str = ""  # the text scored
    cpu: float = 0.0
    rss_kb: int = 0
    rest_kb: int = 0
    error: str | None = None
    sections: list[tuple[str | None, int, int | None]] = field(default_factory=list)  # heading, level, page
    chunks: list[tuple[str, str]] = field(default_factory=list)  # text, part not in the previous chunk


def _status_kb(field: str) -> int:
    """VmRSS (now) or VmHWM (the peak) of this process: its own, unlike ru_maxrss, which keeps
    the peak of the parent it was forked from."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def read(reader: str, path: str) -> Reading:
    """Run in the child: one reader on one PDF."""
    try:
        if reader.startswith("pdftotext"):
            return _pdftotext(reader, path)
        return {OURS: _ours, "pdfminer.six": _pdfminer, "pypdfium2": _pdfium}[reader](path)
    except Exception as exc:  # noqa: BLE001 - a reader failing on a file is a result
        return Reading(reader, error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")


def _timed(reader: str, call: Any) -> tuple[Any, Reading]:
    rest = _status_kb("VmRSS")
    cpu, children = time.process_time(), _children_cpu()
    value = call()
    spent = time.process_time() - cpu + _children_cpu() - children
    rss = _status_kb("VmHWM")
    return value, Reading(reader, cpu=spent, rss_kb=rss, rest_kb=rest)


def _ours(path: str) -> Reading:
    from ingestion_pipeline.processing import chunking_from_settings, parse
    from ingestion_pipeline.processing.chunking import chunk_spans
    from ingestion_pipeline.settings import load_settings

    if path.lower().endswith(".pdf"):
        # parse() imports its PDF reader (and PDFium) on its first PDF: imported before the
        # clock starts, as the anchors' libraries are (75 ms a child, a fifth of a 20-page PDF).
        import ingestion_pipeline.processing.pdf  # noqa: F401

    options = chunking_from_settings(load_settings())
    content = Path(path).read_bytes()
    document, reading = _timed(OURS, lambda: parse(content, Path(path).name, max_bytes=len(content) + 1))
    reading.pages = [page.text for page in document.pages]
    reading.page_numbers = [page.ordinal + 1 for page in document.pages]  # what a hit names
    reading.text = "\n\n".join(section.text for section in document.sections)
    for section in document.sections:
        reading.sections.append((section.heading, section.level, section.page_ordinal))
        previous_end = 0
        for start, end in chunk_spans(section.text, options):
            reading.chunks.append((section.text[start:end], section.text[max(start, previous_end) : end]))
            previous_end = end
    return reading


def _pdfminer(path: str) -> Reading:
    from pdfminer.high_level import extract_text

    text, reading = _timed("pdfminer.six", lambda: extract_text(path))
    return _split(reading, text)


def _pdfium(path: str) -> Reading:
    import pypdfium2 as pdfium

    def run() -> list[str]:
        document = pdfium.PdfDocument(path)
        texts = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        document.close()
        return texts

    texts, reading = _timed("pypdfium2", run)
    reading.pages, reading.page_numbers = texts, list(range(1, len(texts) + 1))
    reading.text = "\n\n".join(texts)
    return reading


def _pdftotext(reader: str, path: str) -> Reading:
    command = ["pdftotext", "-enc", "UTF-8", *(["-layout"] if "layout" in reader else []), path, "-"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    output = process.stdout.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        return Reading(reader, error=f"pdftotext exited with {process.returncode}")
    reading = Reading(reader, cpu=usage.ru_utime + usage.ru_stime, rss_kb=usage.ru_maxrss)
    return _split(reading, output.decode("utf-8", "replace"))


def _split(reading: Reading, text: str) -> Reading:
    pages = text.split("\f")
    if pages and not pages[-1].strip():
        pages.pop()  # the form feed after the last page
    reading.pages, reading.page_numbers = pages, list(range(1, len(pages) + 1))
    reading.text = "\n\n".join(pages)
    return reading


def read_all(jobs: list[tuple[str, str]], workers: int = 2) -> dict[tuple[str, str], Reading]:
    """(reader, pdf path) -> its Reading, each in a child process of its own (`python
    pdf_readers.py READER PATH`, the Reading pickled on its stdout), `workers` at a time."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(jobs, pool.map(lambda job: _child(*job), jobs), strict=True))


def _child(reader: str, path: str) -> Reading:
    command = [sys.executable, str(Path(__file__)), reader, path]
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE)
        assert process.stderr is not None
        errors = process.stderr.read()
        _pid, status, usage = os.wait4(process.pid, 0)
        process.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            detail = " ".join(errors.decode(errors="replace").split())[-200:]
            return Reading(reader, error=f"the child exited with {code}: {detail}", rss_kb=usage.ru_maxrss)
        out.seek(0)
        reading: Reading = pickle.load(out)  # noqa: S301 - our own child wrote it
    return reading


if __name__ == "__main__":
    # A reader gone wild fails alone instead of the machine running out of memory.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    pickle.dump(read(sys.argv[1], sys.argv[2]), sys.stdout.buffer)
