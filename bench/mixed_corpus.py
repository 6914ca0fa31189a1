"""`ingest_corpus.py --corpus mixed`: Office documents and scans, built by the bench from
the converters the tests use (testing/ingest_testing/converted: pandoc,
LibreOffice, Pillow; Tesseract reads the scans), never committed binaries.

--copies copies of the converted corpus's twelve documents (DOCX, ODT, EPUB, RTF, PPTX, ODP,
XLSX, ODS, CSV, TSV, an e-mail with a DOCX attachment, a PDF with a text layer) and
--scan-copies copies of four scans at 150 dpi (PNG, JPEG, a two-page TIFF, a two-page
image-only PDF: six pages a copy, each a full page of text). Every copy has its own bytes:
an archive comment (the zipped formats), a row (CSV, TSV), a line (RTF), a header (e-mail),
a comment after the PDF's end (its text layer untouched), and for the scans their own
printed text (the title numbered, the paragraphs rotated). Documents are keyed by path, so
identical bytes at two paths would be two documents parsed twice as well (keyed documents
have no content index: enqueue_document_version); the copies differ anyway, as uploads do.

Every drain is one batch, enqueued and then drained by one `ingest work --drain --json`
with every default (parsing in children, one per core). First the corpus in two drains
into one database: the documents, then the scans (alone, so that its CPU is the OCR's).
Then, into a second database, each format drained alone, and three start-up drains of one
small CSV (before the documents' formats, before the scans', after them): a drain's fixed
cost (the interpreter, imports, the fork server), whose median the "net" columns subtract
once per drain. Their spread is the noise of those columns.

CPU: `ingest work` runs as our child, and we are a child subreaper (prctl
PR_SET_CHILD_SUBREAPER) while it runs. Its fork server (which starts the parsing children
and reaps them, each child having waited for its Tesseract runs) outlives it and would be
reparented to init, its CPU lost to us, without that; with it, it is reparented to us and
we reap it and any other orphan of the tree before reading the counters. CPU s is the user
+ system delta of getrusage(RUSAGE_CHILDREN) over the drain: the worker, its fork server,
its parsing children and their Tesseract processes, every one waited for. Not the
PostgreSQL server's CPU. CPU s per OCR'd page: a scans drain's CPU over the pages its
documents have in document_pages (their committed generation), start-up included; "net":
without it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from common import (
    ROOT,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    median,
    print_table,
)
from mixed_files import DOCUMENTS, SCANS, STARTUP, MixedFile, build_mixed

from ingest_testing.converted import missing_tools

INGEST = str(ROOT / ".venv" / "bin" / "ingest")
PR_SET_CHILD_SUBREAPER = 36


# -- a drain, and its CPU -------------------------------------------------------------------


@contextmanager
def subreaper() -> Iterator[None]:
    """Orphans of our descendants are reparented to us, not to init, while this holds."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def reap_orphans(known: set[int], timeout: float = 60) -> int:
    """Wait for every child of ours not in `known` (orphans of the drain's tree, reparented
    to us) until none is left; how many were reaped."""
    reaped = 0
    deadline = time.monotonic() + timeout
    while orphans := [child.pid for child in psutil.Process().children() if child.pid not in known]:
        for pid in orphans:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped += 1
            except ChildProcessError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of the drain still running after {timeout:g} s: {orphans}")
        time.sleep(0.05)
    return reaped


def cpu_seconds(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


@dataclass
class Drain:
    name: str
    files: list[MixedFile]
    enqueue_seconds: float = 0.0
    seconds: float = 0.0  # `ingest work --drain`, start to exit
    cpu: float = 0.0  # the whole tree, see the module's docstring
    cpu_reaped_after: float = 0.0  # of which: the processes `ingest work` left behind (reaped by us)
    orphans: int = 0
    stderr: str = ""  # of the worker and the processes under it (the fork server's included)
    report: dict = field(default_factory=dict)
    documents: list[dict] = field(default_factory=list)  # per document, from the database


def drain(uri: str, run: Drain) -> None:
    """`ingest work --drain --json` (every default) as our child; wall time to its exit, CPU
    of its whole tree."""
    env = {**os.environ, "DATABASE_URL": uri}
    known = {child.pid for child in psutil.Process().children()}
    before = cpu_seconds(resource.getrusage(resource.RUSAGE_CHILDREN))
    with subreaper():
        started = time.perf_counter()
        with tempfile.TemporaryFile("w+") as stderr:
            command = [INGEST, "work", "--drain", "--json"]
            proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
            assert proc.stdout is not None
            with proc.stdout:
                out = proc.stdout.read()
            _, status, own = os.wait4(proc.pid, 0)  # its rusage: itself and what it waited for
            run.seconds = time.perf_counter() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
            run.orphans = reap_orphans(known)
            stderr.seek(0)
            run.stderr = stderr.read()
    run.cpu = cpu_seconds(resource.getrusage(resource.RUSAGE_CHILDREN)) - before
    run.cpu_reaped_after = run.cpu - cpu_seconds(own)
    if proc.returncode:
        raise RuntimeError(f"ingest work exited with {proc.returncode}: {run.stderr}")
    run.report = json.loads(out)


DOCUMENTS_SQL = """
select d.source_key, d.source_name, d.status, d.error_message, d.metadata->'notes' as notes,
       (select count(*) from document_pages p
         where p.document_id = d.id and p.index_generation_id = d.index_generation_id) as pages
  from documents d
 where d.batch_id = %s
"""


def ingest(uri: str, run: Drain) -> None:
    """Enqueue the drain's files as one batch, drain it, read back what each document got."""
    from ingestion_pipeline.db.connection import make_pool
    from ingestion_pipeline.operations.enqueue import enqueue_paths, source_key_of
    from ingestion_pipeline.settings import Settings

    settings = Settings(database_url=uri)
    started = time.perf_counter()
    with make_pool(uri, settings) as pool:
        paths = [file.path for file in run.files]
        enqueued = enqueue_paths(pool, paths, max_bytes=settings.max_file_bytes, batch_name=f"mixed {run.name}")
    run.enqueue_seconds = time.perf_counter() - started
    with connect(uri) as conn:
        conn.execute("checkpoint")
    drain(uri, run)
    labels = {source_key_of(file.path): file.label for file in run.files}
    with connect(uri) as conn:
        rows = conn.execute(DOCUMENTS_SQL, (enqueued.batch_id,)).fetchall()
    run.documents = [{**row, "label": labels[row["source_key"]]} for row in rows]


# -- printing --------------------------------------------------------------------------------


def pages(run: Drain) -> int:
    return sum(row["pages"] for row in run.documents)


def failed(run: Drain) -> int:
    return sum(row["status"] != "indexed" for row in run.documents)


@dataclass(frozen=True)
class Base:
    """What a drain costs before its documents: the start-up drains' medians."""

    seconds: float
    cpu: float


def row(name: str, runs: list[Drain], base: Base | None, *, rate: bool = True) -> list:
    """One line of a table, `runs` summed; "net": minus the start-up's wall time and CPU
    once per drain; per OCR'd page for the scans only."""
    docs, page_count = sum(len(r.documents) for r in runs), sum(pages(r) for r in runs)
    seconds, cpu = sum(r.seconds for r in runs), sum(r.cpu for r in runs)
    net_seconds = seconds - len(runs) * base.seconds if base else float("nan")
    net_cpu = cpu - len(runs) * base.cpu if base else float("nan")
    ocr = all(file.label in SCANS for r in runs for file in r.files)
    return [
        name,
        docs,
        sum(failed(r) for r in runs),
        page_count,
        f"{seconds:.2f}",
        f"{docs / seconds:.1f}" if rate else "",
        "" if math.isnan(net_seconds) else f"{net_seconds:.2f}",
        f"{cpu:.1f}",
        "" if math.isnan(net_cpu) else f"{net_cpu / docs * 1000:.0f}",
        f"{cpu / page_count:.2f}" if ocr else "",
        f"{net_cpu / page_count:.2f}" if ocr and base else "",
    ]


COLUMNS = [
    "docs",
    "failed",
    "pages",
    "wall s",
    "docs/s",
    "net wall s",
    "CPU s",
    "net CPU ms/doc",
    "CPU s/OCR'd page",
    "net",
]


def print_drains(groups: list[Drain], base: Base) -> None:
    rows = [row(run.name, [run], base) for run in groups]
    rows.append(row("all (both drains)", groups, base))
    print_table("the corpus: documents, then scans, one drain each", ["drain", *COLUMNS], rows)


def print_formats(formats: list[Drain], startups: list[Drain], base: Base) -> None:
    rows = [row(f"{run.name} (1 CSV)", [run], None, rate=False) for run in startups]
    rows += [row(run.name, [run], base, rate=False) for run in formats]
    print_table("per format: each drained alone by its own `ingest work --drain`", ["format", *COLUMNS], rows)


def print_problems(runs: list[Drain]) -> None:
    for run in runs:
        for doc in sorted(run.documents, key=lambda d: d["source_key"]):
            if doc["status"] != "indexed":
                print(f"FAILED ({run.name}) {doc['source_name']}: {doc['status']}: {doc['error_message']}")
            for note in doc["notes"] or []:
                print(f"note ({run.name}) {doc['source_name']}: {note}")
        if run.stderr.strip():
            print(f"stderr of the {run.name} drain:\n{run.stderr.rstrip()}")


def print_notes(runs: list[Drain]) -> None:
    left = sum(run.cpu_reaped_after for run in runs)
    print(
        f"CPU s: user + system of `ingest work` and every process under it, the fork server and its "
        f"parsing children (and their Tesseract runs) included: {left:.1f} of the {sum(r.cpu for r in runs):.1f} s "
        "were in processes `ingest work` left running at its exit, reparented to this bench (a subreaper) and "
        "reaped by it; RUSAGE_CHILDREN misses them otherwise. Not the server's CPU. net: minus the start-up "
        "drain's wall time and CPU once per drain"
    )
    for run in runs:
        report = run.report
        if report.get("completed") != len(run.files) or report.get("failed") or report.get("retried"):
            print(f"{run.name}: worker report {json.dumps({k: report.get(k) for k in REPORTED})}")


REPORTED = ("claimed", "completed", "failed", "retried", "lease_lost", "abandoned")


# -- the bench ---------------------------------------------------------------------------------


def run_mixed(args: argparse.Namespace) -> None:
    missing = missing_tools()  # pandoc, soffice and tesseract
    if missing:
        raise SystemExit(f"--corpus mixed needs: {', '.join(missing)}")
    folder = Path(tempfile.mkdtemp(prefix="ingest-bench-mixed-"))
    try:
        started = time.perf_counter()
        files = build_mixed(folder, args.copies, args.scan_copies)
        built = time.perf_counter() - started
        with embedded_server() as server_uri:
            print(machine_line(server_uri))
            corpus = [file for file in files if file.label != STARTUP]
            print(
                f"corpus: mixed, {args.copies} copies of {len(DOCUMENTS)} documents, {args.scan_copies} "
                f"of {len(SCANS)} scans: {len(corpus)} files, {sum(f.path.stat().st_size for f in corpus) / 1e6:.2f} "
                f"MB, built in {built:.1f} s"
            )
            groups, formats, startups = drain_all(server_uri, files)
        base = Base(median([r.seconds for r in startups]), median([r.cpu for r in startups]))
        print_drains(groups, base)
        print_formats(formats, startups, base)
        print()
        print_notes([*groups, *startups, *formats])
        print_problems([*groups, *startups, *formats])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def drain_all(server_uri: str, files: list[MixedFile]) -> tuple[list[Drain], list[Drain], list[Drain]]:
    """The documents, then the scans, into one database; then, into a second one, each
    format alone, a start-up drain before the documents' formats, before the scans' and
    after them."""
    groups = [
        Drain("documents", [file for file in files if file.label in DOCUMENTS]),
        Drain("scans", [file for file in files if file.label in SCANS]),
    ]
    startups = [Drain(f"{STARTUP} {n}", [file]) for n, file in enumerate(labelled(files, STARTUP), 1)]
    documents = [Drain(label, labelled(files, label)) for label in DOCUMENTS]
    scans = [Drain(label, labelled(files, label)) for label in SCANS]
    alone = [startups[0], *documents, startups[1], *scans, *startups[2:]]
    for database, runs in (("bench_ingest_mixed", groups), ("bench_ingest_mixed_formats", alone)):
        uri = create_database(server_uri, database, migrate=True)
        for run in runs:
            if run.files:
                ingest(uri, run)
                print(f"{run.name}: {len(run.documents)} docs in {run.seconds:.2f} s, CPU {run.cpu:.1f} s", flush=True)
        drop_database(server_uri, database)
    return [r for r in groups if r.files], [r for r in documents + scans if r.files], startups


def labelled(files: list[MixedFile], label: str) -> list[MixedFile]:
    return [file for file in files if file.label == label]
