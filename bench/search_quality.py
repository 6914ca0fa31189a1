"""Search quality on the PostgreSQL 15 manual (issue 35): this project's lexical search
against two BM25 baselines, on queries nobody here wrote, judged by the manual's own
back-of-book index.

Corpus and judgments (bench/bookindex.py): every HTML page of the manual from Debian's
`postgresql-doc-15` package but the index page itself (1,168 pages; installed with apt-get
when missing and running as root, else the script says how to get it; nothing of it is
committed). Each entry of `bookindex.html` (a term, or "term subterm") is a query; the pages
its links point to (file names, anchors dropped) are its relevant pages. --queries of them
(default 1,000) are drawn with --seed; what was left out is counted and printed.

Systems, each returning up to 10 page file names per query:

  ours     a fresh database at head filled by `ingest enqueue` (every page, one batch) and
           `ingest work --drain`, then `ingest janitor` (its last pass folds the search term
           counts) and ANALYZE (what the schedule and autovacuum would do; --no-analyze skips
           the ANALYZE), then ingestion_pipeline.search.search(conn, q, mode="lexical", limit=10): one
           hit per page, as bench/relevance.py searches. Timed at the client.
  bm25s    BM25 (bm25s defaults, k1 1.5, b 0.75) over title + body text, English stop words,
           Snowball English stemmer (PyStemmer; without it, unstemmed, and the row says so).
  tantivy  BM25 over two fields, title boosted x2 and body, `en_stem` tokenizer, in memory;
           the query is its words (punctuation dropped, lowercased), any of them may match.

The baselines read each page once with BeautifulSoup: <title>, and the text of <body>, the
DocBook Prev/Next navigation included (ingest drops it since 2ce3f57; dropping it from the
baselines too moved their recall@10 by under 0.01). They run in memory, so their latency is
a floor, not a peer figure for a database; each query's time includes tokenizing it.

Metrics per query, averaged (binary relevance; R = min(relevant pages, 10)): recall@10 =
relevant pages among the first 10 / R; MRR@10 = 1 / rank of the first relevant page (0 past
10); nDCG@10 = sum of 1/log2(rank + 1) over relevant pages in the first 10, over the same for
R pages at ranks 1..R. Latency p50/p95/max per system; recall@10 by kind of query: single
word, multi-word, identifier (has `_` or a digit).

Server: a private embedded PostgreSQL by default, or --database-url (the role needs
CREATEDB; the scratch database is dropped at the end). Needs the bench extra:
`.venv/bin/pip install -e '.[bench]'` (bm25s, PyStemmer, tantivy).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bookindex import MANUAL, Judgment, Judgments, Page, manual_folder, page_files, read_judgments, read_pages, sample
from common import (
    ROOT,
    command_line,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    percentile,
    print_table,
)

from ingestion_pipeline import cli
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.search import search

DATABASE = "bench_search_quality"
DEPTH = 10
KINDS = ["single word", "multi-word", "identifier"]


@dataclass
class Run:
    label: str
    results: list[list[str]]  # per query, page file names best first
    latencies: list[float]  # seconds per query


Searcher = Callable[[str], list[str]]


def run_queries(label: str, searcher: Searcher, queries: Sequence[Judgment]) -> Run:
    run = Run(label, [], [])
    for judgment in queries:
        began = time.perf_counter()
        names = searcher(judgment.query)
        run.latencies.append(time.perf_counter() - began)
        run.results.append(names[:DEPTH])
    return run


# -- ours -------------------------------------------------------------------------------


def index_pages(uri: str, files: list[Path], *work_options: str) -> None:
    """Every page in one batch, drained by `ingest work` (parsing in its threads; with
    `work_options`, e.g. an embedder: bench/search_latency.py)."""
    common = ["--database-url", uri]
    if cli.main(["enqueue", *map(str, files), "--batch", "postgresql 15 manual", *common]) != 0:
        raise SystemExit("ingest enqueue failed")
    if cli.main(["work", "--drain", "--parse-processes", "0", *work_options, *common]) != 0:
        raise SystemExit("ingest work failed")


def measure_ours(server: str, files: list[Path], queries: list[Judgment], analyze: bool) -> Run:
    uri = create_database(server, DATABASE, migrate=True)
    try:
        began = time.monotonic()
        index_pages(uri, files)
        if cli.main(["janitor", "--database-url", uri]) != 0:  # folds the term counts, as the schedule would
            raise SystemExit("ingest janitor failed")
        with connect(uri) as conn:
            if analyze:
                conn.execute("analyze")
            print(f"indexed in {time.monotonic() - began:.0f} s: {index_counts(conn)}", flush=True)
            errors: list[str] = []
            run = run_queries("this project, lexical (`search()`)", lambda q: _ours(conn, q, errors), queries)
        if errors:
            print(f"{len(errors)} queries refused by search(), counted as no results: {errors[:5]}")
        return run
    finally:
        drop_database(server, DATABASE)


def _ours(conn, text: str, errors: list[str]) -> list[str]:
    try:
        return [hit.source_name for hit in search(conn, text, mode="lexical", limit=DEPTH)]
    except IngestError as exc:
        errors.append(f"{text!r}: {exc}")
        return []


def index_counts(conn) -> str:
    docs = conn.execute("select status, count(*) as n from documents group by status order by status").fetchall()
    chunks = conn.execute("select count(*) as n from document_chunks").fetchone()["n"]
    return ", ".join(f"{row['n']} documents {row['status']}" for row in docs) + f", {chunks} chunks"


# -- baselines --------------------------------------------------------------------------


def bm25s_searcher(pages: list[Page]) -> tuple[str, Searcher]:
    import bm25s

    try:
        import Stemmer

        stemmer, label = Stemmer.Stemmer("english"), "bm25s (BM25, stemmed, title + body)"
    except ImportError:
        stemmer, label = None, "bm25s (BM25, NOT stemmed: no PyStemmer, title + body)"
    options = {"stopwords": "en", "stemmer": stemmer, "show_progress": False}
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{p.title}\n{p.body}" for p in pages], **options), show_progress=False)

    def searcher(text: str) -> list[str]:
        tokens = bm25s.tokenize([text], return_ids=False, **options)
        if not tokens[0]:
            return []
        found, scores = retriever.retrieve(tokens, k=DEPTH, show_progress=False)
        return [pages[i].name for i, score in zip(found[0], scores[0], strict=True) if score > 0]

    return label, searcher


def tantivy_searcher(pages: list[Page]) -> tuple[str, Searcher]:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("page", stored=True)
    builder.add_text_field("title", tokenizer_name="en_stem")
    builder.add_text_field("body", tokenizer_name="en_stem")
    index = tantivy.Index(builder.build())
    writer = index.writer()
    for number, page in enumerate(pages):
        writer.add_document(tantivy.Document(page=number, title=page.title, body=page.body))
    writer.commit()
    index.reload()
    searcher_ = index.searcher()

    def searcher(text: str) -> list[str]:
        words = re.sub(r"[^\w\s]", " ", text).lower()  # no query syntax: words only, any may match
        if not words.strip():
            return []
        query = index.parse_query(words, ["title", "body"], field_boosts={"title": 2.0})
        hits = searcher_.search(query, DEPTH).hits
        return [pages[searcher_.doc(address)["page"][0]].name for _score, address in hits]

    return "tantivy (BM25F, title ×2 + body, en_stem)", searcher


# -- metrics ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scores:
    recall: float
    reciprocal: float
    ndcg: float


def score(relevant: frozenset[str], results: Sequence[str]) -> Scores:
    found = [name in relevant for name in results[:DEPTH]]
    ideal = min(len(relevant), DEPTH)
    dcg = sum(1 / math.log2(rank + 1) for rank, hit in enumerate(found, start=1) if hit)
    best = sum(1 / math.log2(rank + 1) for rank in range(1, ideal + 1))
    first = next((rank for rank, hit in enumerate(found, start=1) if hit), None)
    return Scores(sum(found) / ideal, 1 / first if first else 0.0, dcg / best)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def latency(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    milli = seconds * 1000
    return f"{milli:.2f} ms" if milli < 1 else f"{milli:.1f} ms" if milli < 100 else f"{milli:.0f} ms"


def summary_row(run: Run, queries: list[Judgment]) -> list[str]:
    scores = [score(j.relevant, r) for j, r in zip(queries, run.results, strict=True)]
    metrics = [mean([getattr(s, name) for s in scores]) for name in ("recall", "reciprocal", "ndcg")]
    times = [percentile(run.latencies, p) for p in (50, 95)] + [max(run.latencies)]
    return [run.label, *(f"{m:.3f}" for m in metrics), *map(latency, times)]


def kind_rows(runs: list[Run], queries: list[Judgment]) -> list[list[str]]:
    rows = []
    for kind in KINDS:
        picked = [i for i, j in enumerate(queries) if j.kind == kind]
        recalls = [mean([score(queries[i].relevant, run.results[i]).recall for i in picked]) for run in runs]
        rows.append([kind, str(len(picked)), *(f"{r:.3f}" for r in recalls)])
    return rows


# -- the run ----------------------------------------------------------------------------


def git_head() -> str:
    """HEAD's short hash, date and subject; flagged when the package or its SQL differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    changed = git("status", "--porcelain", "--", "ingestion_pipeline", "migrations")
    return git("log", "-1", "--format=%h %cs %s")[:90] + (" (+ uncommitted package changes)" if changed else "")


def print_report(runs: list[Run], queries: list[Judgment], pages: int, judged: Judgments, seed: int) -> None:
    print_table(
        f"judgments: {judged.entries:,} index entries, {len(judged.queries):,} usable queries",
        ["left out", "entries"],
        [[reason, str(n)] for reason, n in sorted(judged.excluded.items())],
    )
    print_table(
        f"search quality, {len(queries):,} sampled queries (seed {seed}), same {pages:,} pages",
        [f"{len(queries):,} queries, same {pages:,} pages", "recall@10", "MRR@10", "nDCG@10", "p50", "p95", "max"],
        [summary_row(run, queries) for run in runs],
    )
    print_table(
        "recall@10 by kind of query", ["kind", "queries", *(run.label for run in runs)], kind_rows(runs, queries)
    )


def write_per_query(path: Path, runs: list[Run], queries: list[Judgment]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i, judgment in enumerate(queries):
            row = {"query": judgment.query, "kind": judgment.kind, "relevant": sorted(judgment.relevant)}
            row |= {run.label: run.results[i] for run in runs}
            out.write(json.dumps(row) + "\n")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL"),
        help="server to create the scratch database on (default: a private embedded one)",
    )
    parser.add_argument("--queries", type=int, default=1000, help="index entries to sample (default 1000)")
    parser.add_argument("--seed", type=int, default=35, help="sampling seed (default 35)")
    parser.add_argument("--manual", type=Path, default=MANUAL, help=f"the manual's html folder (default {MANUAL})")
    parser.add_argument("--no-analyze", dest="analyze", action="store_false", help="search without ANALYZE first")
    parser.add_argument("--per-query", type=Path, help="write each query's judgment and results as JSON lines here")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    for module in ("bm25s", "tantivy"):
        if importlib.util.find_spec(module) is None:
            raise SystemExit(f"{module} is missing: .venv/bin/pip install -e '.[bench]'")
    folder = manual_folder(args.manual, install=args.manual == MANUAL)
    files = page_files(folder)
    judged = read_judgments(folder, {path.name for path in files})
    queries = sample(judged.queries, args.queries, args.seed)
    print(f"$ {command_line()}")
    print(f"HEAD: {git_head()}", flush=True)
    pages = read_pages(files)
    runs = [run_queries(*make(pages), queries) for make in (bm25s_searcher, tantivy_searcher)]
    server_cm = embedded_server() if not args.database_url else contextlib.nullcontext(args.database_url)
    with server_cm as server:
        print(machine_line(server))
        runs.insert(0, measure_ours(server, files, queries, args.analyze))
    print_report(runs, queries, len(files), judged, args.seed)
    if args.per_query:
        write_per_query(args.per_query, runs, queries)


if __name__ == "__main__":
    main()
