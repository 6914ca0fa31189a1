"""Writing the corpus's files: pandoc's documents, the CSV and TSV tables, what LibreOffice
makes of them (XLSX, ODS, ODP, PDF), the e-mail and the scans, with a record of each.
"""

from __future__ import annotations

import csv
import html
import io
import shutil
from collections.abc import Callable, Sequence
from email.message import EmailMessage
from email.policy import SMTP
from pathlib import Path

from ingest_testing.converted.converters import (
    ConvertedFile,
    deferred,
    in_parallel,
    run_pandoc,
    run_soffice,
)
from ingest_testing.converted.scans import DPI, ScanSource, check_scans, scan_markdown, scan_records
from ingest_testing.converted.texts import Text, document_markdown, table

_DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_PANDOC_FILES = ("docx", "odt", "epub", "rtf", "pptx")  # what pandoc makes that the corpus keeps as it is
_CSV_FILTER = "CSV:44,34,76,1"  # LibreOffice's CSV import: comma, double quote, UTF-8, from line 1


def write_corpus(folder: Path, work: Path, texts: dict[str, Text]) -> list[ConvertedFile]:
    """Make every file of the corpus in `folder`, the converters' inputs in `work`."""
    scans = scan_sources(texts)
    check_scans(scans)
    scan_docx = [work / f"{source.name}.docx" for source in scans]
    pandoc_targets = _pandoc_targets(folder, work)
    _run_pandoc(texts, pandoc_targets, scans, scan_docx)
    records = [_record(texts, pandoc_targets[label], label, "pandoc") for label in _PANDOC_FILES]

    table_files = _write_tables(folder, work)
    records += [ConvertedFile(table_files[label], label, table(label)[1], "csv") for label in ("csv", "tsv")]

    made = _run_libreoffice(work, table_files, pandoc_targets, scan_docx)
    records += _keep_libreoffice_files(folder, texts, made)
    records += _write_email(folder, texts, pandoc_targets["eml-attachment"])
    records += scan_records(folder, scans, made["pdf"][1:], DPI)
    return records


# The scans: one page each for the images, two pages for the PDF; plain paragraphs.
def scan_sources(texts: dict[str, Text]) -> list[ScanSource]:
    sources = []
    for label, name in (("png", "scan-page"), ("jpeg", "photo-page"), ("tiff", "fax-page"), ("pdf-scan", "scanned")):
        text = texts[label]
        paragraphs = [text.title] + [p for _, section in text.sections for p in section]
        half = len(paragraphs) // 2
        parts = [paragraphs[:half], paragraphs[half:]] if label == "pdf-scan" else [paragraphs]
        pages = tuple("\n\n".join(part) for part in parts)
        sources.append(ScanSource(name, "pdf" if label == "pdf-scan" else label, pages, text.phrase))
    return sources


def _record(texts: dict[str, Text], path: Path, label: str, made_by: str) -> ConvertedFile:
    return ConvertedFile(path, label, texts[label].phrase, made_by)


def _pandoc_targets(folder: Path, work: Path) -> dict[str, Path]:
    """pandoc: the corpus's own files straight into the folder, the inputs of LibreOffice and
    of the email into the work folder."""
    return {
        "docx": folder / "archiving-handbook.docx",
        "odt": folder / "vacuum-runbook.odt",
        "epub": folder / "index-field-guide.epub",
        "rtf": folder / "replication-memo.rtf",
        "pptx": folder / "checkpoint-review.pptx",
        "odp": work / "promotion-drill.pptx",
        "eml-attachment": work / "rebuild-runbook.docx",
        "pdf": work / "recovery-targets.docx",
    }


def _run_pandoc(
    texts: dict[str, Text], targets: dict[str, Path], scans: Sequence[ScanSource], scan_docx: Sequence[Path]
) -> None:
    """Every pandoc run, in parallel: the documents, and the scans' sources as DOCX."""
    tasks = [
        deferred(
            run_pandoc,
            document_markdown(texts[label], slides=target.suffix == ".pptx"),
            target,
            title=texts[label].title,
        )
        for label, target in targets.items()
    ]
    tasks += [deferred(run_pandoc, scan_markdown(source), path) for source, path in zip(scans, scan_docx, strict=True)]
    in_parallel(tasks)


def _write_tables(folder: Path, work: Path) -> dict[str, Path]:
    """Tables: CSV and TSV as they are; two more CSVs for LibreOffice to turn into XLSX and ODS."""
    table_files = {
        "csv": folder / "replica-settings.csv",
        "tsv": folder / "index-inventory.tsv",
        "xlsx": work / "seat-plan.csv",
        "ods": work / "job-schedule.csv",
    }
    for label, path in table_files.items():
        rows, _ = table(label)
        path.write_text(_delimited(rows, "\t" if label == "tsv" else ","), encoding="utf-8")
    return table_files


def _run_libreoffice(
    work: Path, table_files: dict[str, Path], pandoc_targets: dict[str, Path], scan_docx: Sequence[Path]
) -> dict[str, list[Path]]:
    """LibreOffice: one run per target format, the runs in parallel; what each made, by format
    (the PDFs: the recovery targets, then the scans' pages)."""
    made: dict[str, list[Path]] = {}

    def soffice(key: str, target_format: str, inputs: list[Path], infilter: str | None = None) -> Callable[[], None]:
        def call() -> None:
            made[key] = run_soffice(target_format, inputs, work / key, infilter=infilter)

        return call

    in_parallel(
        [
            soffice("xlsx", "xlsx", [table_files["xlsx"]], _CSV_FILTER),
            soffice("ods", "ods", [table_files["ods"]], _CSV_FILTER),
            soffice("odp", "odp", [pandoc_targets["odp"]]),
            soffice("pdf", "pdf", [pandoc_targets["pdf"], *scan_docx]),
        ]
    )
    return made


def _keep_libreoffice_files(folder: Path, texts: dict[str, Text], made: dict[str, list[Path]]) -> list[ConvertedFile]:
    """The XLSX, ODS, ODP and the first PDF moved into `folder`, and their records."""
    records = []
    for label, name in (("xlsx", "seat-plan.xlsx"), ("ods", "job-schedule.ods")):
        target = folder / name
        shutil.move(made[label][0], target)
        records.append(ConvertedFile(target, label, table(label)[1], "LibreOffice"))
    for label, name in (("odp", "promotion-drill.odp"), ("pdf", "recovery-targets.pdf")):
        target = folder / name
        shutil.move(made[label][0], target)
        records.append(_record(texts, target, label, "LibreOffice"))
    return records


def _write_email(folder: Path, texts: dict[str, Text], attachment: Path) -> list[ConvertedFile]:
    """The email: an HTML body with its text/plain alternative, and a DOCX attachment."""
    eml = folder / "storage-report.eml"
    eml.write_bytes(_email(texts["eml"], attachment))
    return [
        _record(texts, eml, "eml", "email"),
        ConvertedFile(eml, "eml-attachment", texts["eml-attachment"].phrase, "email+pandoc"),
    ]


def _delimited(rows: Sequence[Sequence[str]], delimiter: str) -> str:
    stream = io.StringIO()
    writer = csv.writer(stream, delimiter=delimiter, lineterminator="\n")
    writer.writerows(rows)
    return stream.getvalue()


def _email(text: Text, attachment: Path) -> bytes:
    message = EmailMessage()
    message["From"] = "Storage Desk <storage-desk@example.org>"
    message["To"] = "Database Team <dba@example.org>"
    message["Subject"] = text.title
    message["Date"] = "Tue, 02 Dec 2025 09:30:00 +0000"
    message["Message-ID"] = "<weekly-storage-report-49@example.org>"
    plain = [text.title, ""]
    body = [f"<h1>{html.escape(text.title)}</h1>"]
    for heading, paragraphs in text.sections:
        plain += [heading, "", *(f"{p}\n" for p in paragraphs)]
        body.append(f"<h2>{html.escape(heading)}</h2>")
        body += [f"<p>{html.escape(p)}</p>" for p in paragraphs]
    message.set_content("\n".join(plain))
    page = f"<!doctype html><html><head><title>{html.escape(text.title)}</title></head><body>"
    message.add_alternative(page + "\n".join(body) + "</body></html>\n", subtype="html")
    maintype, subtype = _DOCX_TYPE.split("/")
    message.add_attachment(attachment.read_bytes(), maintype=maintype, subtype=subtype, filename=attachment.name)
    return message.as_bytes(policy=SMTP)
