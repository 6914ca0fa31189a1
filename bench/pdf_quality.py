"""PDF reading (issue 59): this project's PDF reader beside four extractors, on PDFs whose words,
tables and headings are known from an HTML twin (bench/pdf_corpus.py: Debian documentation
packages shipping one document as PDF and HTML; bench/pdf_synthetic.py: PDFs made here with
groff, headless Chromium and LibreOffice from a known source). Readers: bench/pdf_readers.py.

Measures (bench/pdf_metrics.py normalizes every text first: NFKC ligatures, accents, case,
hyphens and dashes with the whitespace after them, punctuation, whitespace):

  text fidelity     the share of the twin's paragraphs (p, li, dd of 8 words or more, not in
                    a table, pre, navigation or table of contents) found whole, in order, in
                    the reader's text (ours: its sections' texts joined in order; anchors:
                    their pages, a page break where a paragraph may hold the running lines
                    and footnotes printed there). In order: each is looked for from where the
                    previous one found ended; one found only before that counts as not found
                    (`out of order`, printed), and the search goes on from it. Each HTML file
                    of a split twin is in order on its own. Paragraphs in no anchor's text
                    (HTML-only content) are not counted (pdf_metrics.fidelity, mark_absent).
  table rows        the share of the twin's table rows with 2 non-empty cells or more (not
                    of a layout table holding tables) that the PDF prints whose cells all
                    appear in order within 3x the row's length from where the first cell is
                    found. Printed: some anchor has all the row's cells, each whole, in any
                    order, on one page (or two in a row); rows no anchor prints are not
                    counted, for any reader (printed per document; bench/pdf_tables.py).
  headings kept     the share of the twin's h1-h4 headings that the PDF prints (found in
                    pdftotext's text) whose text equals, as is or without its numbering
                    ("2.1."), a section heading of this project's document. Anchors: "—".
  page furniture    the share of this project's chunks holding a running line: first and
                    last lines of pdftotext's pages whose text with digits masked repeats on
                    3 pages or more, and bare page numbers. A line's occurrences in the
                    chunks past the most it occurs in the twin's text or in pdftotext's text
                    without those lines are furniture (pdf_metrics.furniture_chunks).
  search            right document first / right page first (the top hit's document, and
                    its page) for sentences of the twin with a third of their words dropped
                    (bench/pdf_search.py: a twin is right too); anchors: bm25s over its pages.
  pages per CPU-second  the PDFs' pages over the CPU seconds of the parse alone; peak RSS:
                    the most of any one PDF's parsing child (Python readers: interpreter
                    included, see `RSS before parse`).

--big: one PDF of 3,000 pages or more (the corpus's PDFs imported over and over with
pypdfium2), parsed by this project's reader in a child: pages, CPU, pages per CPU-second, peak
RSS (the bar: 500 MB). Results go to stdout and are appended to bench/results/pdf_quality.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import time
from collections import defaultdict
from pathlib import Path

import pdf_corpus
import pdf_metrics as m
import pdf_search
import pdf_synthetic
import pdf_tables
from common import ROOT, command_line, embedded_server, machine_line, print_table
from pdf_readers import ANCHORS, OURS, READERS, Reading, read_all
from search_quality import git_head

RESULTS = ROOT / "bench" / "results" / "pdf_quality.md"
DASH = "—"


class Report:
    """Tables printed and kept as Markdown for the results file."""

    def __init__(self) -> None:
        self.markdown: list[str] = []

    def line(self, text: str) -> None:
        print(text, flush=True)
        self.markdown.append(text + "\n")

    def table(self, title: str, headers: list[str], rows: list[list[str]]) -> None:
        print_table(title, headers, rows)
        self.markdown.append(f"\n{title}:\n\n| " + " | ".join(headers) + " |\n|" + " --- |" * len(headers) + "\n")
        self.markdown += ["| " + " | ".join(row) + " |\n" for row in rows]


def share(found: int, total: int) -> str:
    return f"{found / total:.3f}" if total else DASH


class Scores:
    """Counts per (document, reader)."""

    def __init__(self) -> None:
        self.fidelity: dict[tuple[str, str], m.Fidelity] = {}
        self.rows: dict[tuple[str, str], tuple[int, int]] = {}
        self.headings: dict[str, tuple[int, int]] = {}
        self.furniture: dict[str, tuple[int, int]] = {}

    def total(self, kind: str, reader: str, names: list[str]) -> tuple[int, int]:
        if kind == "fidelity":
            scores = [self.fidelity[(n, reader)] for n in names]
            return sum(s.found for s in scores), sum(s.total for s in scores)
        pairs = [self.rows[(n, reader)] for n in names] if kind == "rows" else [getattr(self, kind)[n] for n in names]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def score_document(doc: pdf_corpus.Document, truth: m.Truth, readings: dict[str, Reading], scores: Scores) -> None:
    reference = readings["pdftotext"]
    m.mark_absent(truth, [m.paged(readings[r].pages) for r in ANCHORS])
    pdf_tables.mark_unprinted(truth, [readings[r].pages for r in ANCHORS])
    for reader, reading in readings.items():
        text = f" {m.norm(reading.text)} "
        scores.fidelity[(doc.name, reader)] = m.fidelity(truth, text if reader == OURS else m.paged(reading.pages))
        scores.rows[(doc.name, reader)] = pdf_tables.table_rows(truth, text)
    ours = readings[OURS]
    expected = m.expected_headings(truth, f" {m.norm(reference.text)} ")
    scores.headings[doc.name] = (m.headings_kept(expected, (h for h, _l, _p in ours.sections)), len(expected))
    chunks = [m.ChunkText(text, fresh) for text, fresh in ours.chunks]
    flagged = m.furniture_chunks(chunks, m.furniture(reference.pages), truth)
    scores.furniture[doc.name] = (len(flagged), len(chunks))


def corpus(args: argparse.Namespace) -> list[pdf_corpus.Document]:
    names = pdf_corpus.QUICK if args.quick else None
    documents = pdf_corpus.debian_documents(names) + pdf_synthetic.made_documents(None if names is None else ())
    if args.quick:
        documents += pdf_synthetic.made_documents(("groff-man", "chromium-paper", "libreoffice-docx"))
    return documents


def print_corpus(report: Report, documents: list[pdf_corpus.Document], truths: dict[str, m.Truth]) -> None:
    rows = [
        [
            d.name,
            d.source,
            f"{d.pages:,}",
            "yes" if d.outline else "no",
            str(len(d.html)),
            f"{truths[d.name].paragraphs:,}",
            f"{len(truths[d.name].rows):,}",
            f"{len(truths[d.name].headings):,}",
            d.producer[:48],
        ]
        for d in documents
    ]
    pages = sum(d.pages for d in documents)
    headers = ["document", "source", "pages", "outline", "twin files", "paragraphs", "table rows", "headings"]
    report.table(f"Corpus: {len(documents)} PDFs, {pages:,} pages", [*headers, "creator / producer"], rows)


def reader_label(reader: str) -> str:
    return {
        OURS: "this project (parse; search: ingest search, default mode)",
        "pdftotext": "pdftotext (poppler); search: bm25s over its pages",
        "pypdfium2": "pypdfium2 (get_text_range)",
    }.get(reader, reader)


def main_table(report: Report, documents, scores: Scores, readings, answers, queries: int) -> None:
    names = [d.name for d in documents]
    rows = []
    for reader in READERS:
        done = [d for d in documents if readings[(reader, str(d.pdf))].error is None]
        cpu = sum(readings[(reader, str(d.pdf))].cpu for d in done)
        rss = max((readings[(reader, str(d.pdf))].rss_kb for d in done), default=0)
        doc_first, page_first = answers[reader].shares() if reader in answers else (float("nan"),) * 2
        ours = reader == OURS
        rows.append(
            [
                reader_label(reader),
                share(*scores.total("fidelity", reader, names)),
                share(*scores.total("rows", reader, names)),
                share(*scores.total("headings", reader, names)) if ours else DASH,
                f"{share(*scores.total('furniture', reader, names))}" if ours else DASH,
                f"{doc_first:.3f}",
                f"{page_first:.3f}",
                f"{sum(d.pages for d in done) / cpu:,.0f}" if cpu else DASH,
                f"{rss / 1024:,.0f} MB",
            ]
        )
    for extra in [answers[key] for key in ("ours-lexical", "ours-vector", "ours-bm25s") if key in answers]:
        doc_first, page_first = extra.shares()
        rows.append([extra.label, *[DASH] * 4, f"{doc_first:.3f}", f"{page_first:.3f}", DASH, DASH])
    headers = ["reader", "text fidelity", "table rows", "headings kept as headings", "chunks with page furniture"]
    headers += ["search: right document first", "right page first", "pages per CPU-second", "peak RSS"]
    pages = sum(d.pages for d in documents)
    report.table(f"PDF reading: {len(documents)} PDFs, {pages:,} pages, {queries} queries", headers, rows)


def document_tables(report: Report, documents, truths, scores: Scores, answers, queries_of) -> None:
    rows = []
    for d in documents:
        fid = [share(scores.fidelity[(d.name, r)].found, scores.fidelity[(d.name, r)].total) for r in READERS]
        late = scores.fidelity[(d.name, OURS)].out_of_order
        q = queries_of.get(d.name, [])
        ours, bm = _answers_of(answers.get(OURS), q), _answers_of(answers.get("pdftotext"), q)
        rows.append(
            [
                d.name,
                f"{d.pages:,}",
                *fid,
                str(late),
                _frac(*scores.headings[d.name]),
                _frac(*scores.furniture[d.name]),
                ours,
                bm,
            ]
        )
    headers = ["document", "pages", *(f"fidelity: {r}" for r in READERS), "ours out of order"]
    headers += ["headings: ours", "furniture chunks: ours"]
    headers += ["search doc/page: ours", "bm25s over pdftotext"]
    report.table("Per document (fidelity: in-order share of the twin's paragraphs)", headers, rows)
    lows = [
        f"{r}: lowest {min(documents, key=lambda d: scores.fidelity[(d.name, r)].share).name} "
        f"{min(scores.fidelity[(d.name, r)].share for d in documents):.3f}"
        for r in READERS
    ]
    report.line("\nlowest fidelity per reader: " + "; ".join(lows))
    by_source: dict[str, list[str]] = defaultdict(list)
    for d in documents:
        by_source[d.source].append(d.name)
    rows = []
    for source, names in by_source.items():
        pages = sum(d.pages for d in documents if d.name in names)
        q = [query for n in names for query in queries_of.get(n, [])]
        rows.append(
            [source, str(len(names)), f"{pages:,}"]
            + [share(*scores.total("fidelity", r, names)) for r in READERS]
            + [share(*scores.total("rows", OURS, names)), share(*scores.total("headings", OURS, names))]
            + [share(*scores.total("furniture", OURS, names))]
            + [_answers_of(answers.get(OURS), q), _answers_of(answers.get("pdftotext"), q)]
        )
    headers = ["source", "PDFs", "pages", *(f"fidelity: {r}" for r in READERS), "rows: ours", "headings: ours"]
    headers += ["furniture: ours", "search doc/page: ours", "bm25s over pdftotext"]
    report.table("Per corpus source", headers, rows)
    headers, rows = pdf_tables.per_document(documents, truths, scores.rows, READERS)
    report.table("Table rows per document (found / rows the PDF prints)", headers, rows)
    with_outline = [d.name for d in documents if d.outline]
    without = [d.name for d in documents if not d.outline]
    report.line(
        f"\nheadings kept as headings: PDFs with an outline {_frac(*scores.total('headings', OURS, with_outline))}"
        f" = {share(*scores.total('headings', OURS, with_outline))}; without one "
        f"{_frac(*scores.total('headings', OURS, without))} = {share(*scores.total('headings', OURS, without))}"
    )


def _frac(found: int, total: int) -> str:
    return f"{found}/{total}"


def _answers_of(answers: pdf_search.Answers | None, queries: list[int]) -> str:
    if answers is None or not queries:
        return DASH
    doc = sum(answers.document[i] for i in queries)
    page = sum(answers.page[i] for i in queries)
    return f"{doc}/{page} of {len(queries)}"


def perf_table(report: Report, documents, readings) -> None:
    rows = []
    for reader in READERS:
        done = [readings[(reader, str(d.pdf))] for d in documents]
        ok = [r for r in done if r.error is None]
        pages = sum(d.pages for d in documents if readings[(reader, str(d.pdf))].error is None)
        cpu = sum(r.cpu for r in ok)
        rest = max((r.rest_kb for r in ok), default=0)
        rows.append(
            [
                reader,
                f"{pages:,}",
                f"{cpu:.1f}",
                f"{pages / cpu:,.0f}" if cpu else DASH,
                f"{max((r.rss_kb for r in ok), default=0) / 1024:,.0f} MB",
                f"{rest / 1024:,.0f} MB" if rest else DASH,
                str(len(done) - len(ok)),
            ]
        )
    headers = ["reader", "pages read", "CPU s", "pages per CPU-second", "peak RSS", "RSS before parse", "failed PDFs"]
    report.table("Parse cost (each PDF in a spawned child of its own)", headers, rows)
    for reader in READERS:
        for d in documents:
            if (error := readings[(reader, str(d.pdf))].error) is not None:
                report.line(f"{reader} failed on {d.name}: {error}")


def search_run(args, documents, truths, readings, report: Report) -> tuple[dict, dict]:
    queries: list[pdf_search.Query] = []
    queries_of: dict[str, list[int]] = defaultdict(list)
    pdftotext = {d.name: readings[("pdftotext", str(d.pdf))].pages for d in documents}
    for d in documents:
        for query in pdf_search.make_queries(d.name, truths[d.name].raw_paragraphs, pdftotext, args.queries, args.seed):
            queries_of[d.name].append(len(queries))
            queries.append(query)
    answers: dict[str, pdf_search.Answers] = {}
    for reader in ANCHORS:
        pages = {
            d.name: (readings[(reader, str(d.pdf))].pages, readings[(reader, str(d.pdf))].page_numbers)
            for d in documents
        }
        answers[reader] = pdf_search.bm25s_answers(f"bm25s over {reader}", pages, queries)
    ours = {d.name: (readings[(OURS, str(d.pdf))].pages, readings[(OURS, str(d.pdf))].page_numbers) for d in documents}
    answers["ours-bm25s"] = pdf_search.bm25s_answers("bm25s over this project's pages", ours, queries)
    if not args.no_search:
        began = time.monotonic()
        server_cm = embedded_server() if not args.database_url else contextlib.nullcontext(args.database_url)
        with server_cm as server:
            report.line(machine_line(server))
            files = {d.name: d.pdf for d in documents}
            found = pdf_search.project_answers(server, files, queries, args.keep)
            answers |= {OURS: found.pop("default")} | {f"ours-{key}": a for key, a in found.items()}
        report.line(f"indexed and searched in {time.monotonic() - began:.0f} s")
    report.line(f"queries another document answers too (twins): {sum(1 for q in queries if q.twins)} of {len(queries)}")
    return answers, {"queries": queries, "of": queries_of}


def big_run(report: Report, documents: list[pdf_corpus.Document], pages: int) -> None:
    import pypdfium2 as pdfium

    target = pdf_corpus.CACHE / f"big-{pages}.pdf"
    if not target.is_file():
        big = pdfium.PdfDocument.new()
        while len(big) < pages:
            for d in documents:
                if len(big) < pages:
                    source = pdfium.PdfDocument(str(d.pdf))
                    big.import_pages(source)
                    source.close()
        big.save(str(target))
        big.close()
    size = target.stat().st_size / 2**20
    rows = []
    for reader in (OURS, "pdftotext", "pypdfium2"):
        reading = read_all([(reader, str(target))], workers=1)[(reader, str(target))]
        count = len(reading.page_numbers) if reader != OURS else pdf_corpus.pdf_facts(target)[0]
        rows.append(
            [
                reader,
                f"{count:,}",
                f"{reading.cpu:.1f}",
                f"{count / reading.cpu:,.0f}" if reading.cpu else DASH,
                f"{reading.rss_kb / 1024:,.0f} MB",
                reading.error or "ok",
            ]
        )
    report.table(
        f"--big: {target.name} ({size:.0f} MB), parsed in a spawned child",
        ["reader", "pages", "CPU s", "pages per CPU-second", "peak RSS of the child", "result"],
        rows,
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(pdf_corpus.QUICK)} and three made PDFs")
    parser.add_argument(
        "--big", type=int, nargs="?", const=3000, default=0, help="also the 3,000-page PDF (or N pages)"
    )
    parser.add_argument("--queries", type=int, default=12, help="queries per document (default 12)")
    parser.add_argument("--seed", type=int, default=59)
    parser.add_argument("--workers", type=int, default=2, help="parsing children at a time (default 2)")
    parser.add_argument("--no-search", action="store_true", help="skip indexing and this project's search")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument("--keep", action="store_true", help="keep the database bench_pdf_quality")
    parser.add_argument("--results", type=Path, default=RESULTS, help="append the run here ('-': nowhere)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    began = time.monotonic()
    report = Report()
    report.line(f"$ {command_line()}")
    report.line(f"HEAD: {git_head()}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    documents = corpus(args)
    truths = {d.name: m.read_truth(d.html) for d in documents}
    print_corpus(report, documents, truths)
    readings = read_all([(r, str(d.pdf)) for d in documents for r in READERS], args.workers)
    scores = Scores()
    for d in documents:
        score_document(d, truths[d.name], {r: readings[(r, str(d.pdf))] for r in READERS}, scores)
    absent = ", ".join(f"{d.name} {len(truths[d.name].absent)}" for d in documents if truths[d.name].absent)
    report.line(f"paragraphs in no anchor's text (HTML only, not counted): {absent or 'none'}")
    unprinted = ", ".join(f"{d.name} {len(truths[d.name].unprinted)}" for d in documents if truths[d.name].unprinted)
    report.line(f"table rows no anchor prints (left out, for every reader): {unprinted or 'none'}")
    answers, queries = search_run(args, documents, truths, readings, report)
    main_table(report, documents, scores, readings, answers, len(queries["queries"]))
    document_tables(report, documents, truths, scores, answers, queries["of"])
    perf_table(report, documents, readings)
    if args.big:
        big_run(report, [d for d in documents if d.source != "Chromium print"], args.big)
    report.line(f"\nrun took {time.monotonic() - began:.0f} s")
    if str(args.results) != "-":
        with args.results.open("a", encoding="utf-8") as out:
            out.write(f"\n## Run of {datetime.date.today()}\n\n```\n")
            out.writelines(report.markdown[:2])
            out.write("```\n")
            out.writelines(report.markdown[2:])


if __name__ == "__main__":
    main()
