"""Search quality on questions (issue 47): real FAQ questions of Debian documentation packages,
each judged by its own answer, indexed without its question among the other pages of the same
manuals (bench/faqcorpus.py says which packages, and what is held out).

Systems, each returning up to 10 documents per question:

  lexical, vector, hybrid   a fresh database at head filled by `ingest enqueue` and
                            `ingest work --drain` with the default embedder (or --embedder),
                            then `ingest janitor` and ANALYZE; `search()` in each mode
  default                   `search()` with no mode: what `ingest search` and apps get
  bm25s                     BM25 in memory over each document's title and text (bench/baselines.py)
  fusions (--fusions)       the lexical and vector lists (50 deep) fused in memory as
                            bench/fusion.py's candidates do: for choosing the SQL's fusion

Metrics per question, averaged: MRR@10 (1 / rank of the answer, 0 past 10), recall@10 (the
answer among the first 10), nDCG@10; latency p50/p95 per system, timed at the client.
Server: a private embedded PostgreSQL by default, or --database-url. Needs the bench extra.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable

import faqcorpus
from baselines import bm25s_searcher
from bookindex import Judgment
from common import command_line, connect, create_database, db_uri, drop_database, embedded_server, machine_line
from search_quality import (
    Run,
    database_exists,
    fusion_runs,
    git_head,
    index_counts,
    index_pages,
    print_table,
    run_queries,
    summary_row,
)

from ingestion_pipeline import cli
from ingestion_pipeline.db.migrate import migrate
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.search import search
from ingestion_pipeline.settings import load_settings

DATABASE = "bench_question_quality"
METRICS = ["recall@10", "MRR@10", "nDCG@10", "p50", "p95", "max"]


def judgments(corpus: faqcorpus.FaqCorpus) -> list[Judgment]:
    return [Judgment(q.text, frozenset([q.answer]), q.package) for q in corpus.questions]


def fill(server: str, corpus: faqcorpus.FaqCorpus, args: argparse.Namespace) -> str:
    uri = db_uri(server, DATABASE)
    if args.keep and database_exists(server, DATABASE):
        migrate(uri)
        return uri
    uri = create_database(server, DATABASE, migrate=True)
    began = time.monotonic()
    work = ["--embedder", args.embedder] if args.embedder else []
    index_pages(uri, corpus.files, *work, batch="faq questions")
    if cli.main(["janitor", "--database-url", uri]) != 0:
        raise SystemExit("ingest janitor failed")
    with connect(uri) as conn:
        conn.execute("analyze")
        print(f"indexed in {time.monotonic() - began:.0f} s: {index_counts(conn)}", flush=True)
    return uri


def page_names(corpus: faqcorpus.FaqCorpus) -> dict[str, str]:
    """A hit's source key -> its file's name relative to the corpus folder."""
    return {path.as_uri(): path.relative_to(corpus.folder).as_posix() for path in corpus.files}


def ours(conn, names: dict[str, str], mode: str | None, depth: int, embedder) -> Callable[[str], list[str]]:
    def searcher(text: str) -> list[str]:
        options = {} if mode is None else {"mode": mode}
        try:
            hits = search(conn, text, limit=depth, embedder=embedder, **options)
        except IngestError as exc:
            print(f"refused: {text!r}: {exc}")
            return []
        return [names.get(hit.source_uri or "", hit.source_name) for hit in hits]

    return searcher


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument("--embedder", help="INGEST_EMBEDDER for indexing and queries (default: the settings')")
    parser.add_argument("--keep", action="store_true", help=f"keep (and reuse) the database {DATABASE}")
    parser.add_argument("--fusions", action="store_true", help="also rank bench/fusion.py's candidate fusions")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    print(f"$ {command_line()}")
    print(f"HEAD: {git_head()}", flush=True)
    corpus = faqcorpus.load()
    queries = judgments(corpus)
    embedder = embedder_from_settings(load_settings(), args.embedder)
    server_cm = embedded_server() if not args.database_url else contextlib.nullcontext(args.database_url)
    with server_cm as server:
        print(machine_line(server))
        uri = fill(server, corpus, args)
        try:
            with connect(uri) as conn:
                names = page_names(corpus)
                runs = [
                    run_queries(f"this project, {mode or 'default'}", ours(conn, names, mode, 10, embedder), queries)
                    for mode in (None, "lexical", "vector", "hybrid")
                ]
                runs.append(run_queries(*bm25s_searcher(corpus.pages), queries))
                if args.fusions:
                    runs += fusion_runs(conn, queries, names, embedder)
        finally:
            if not args.keep:
                drop_database(server, DATABASE)
    title = f"{len(queries)} FAQ questions, {len(corpus.files)} documents, embedder {embedder.name}"
    print_table(title, [title.split(",")[0], *METRICS], [summary_row(run, queries) for run in runs])
    by_package = sorted({q.kind for q in queries})
    rows = []
    for package in by_package:
        picked = [i for i, q in enumerate(queries) if q.kind == package]
        sub = [queries[i] for i in picked]
        cells = []
        for run in runs[:5]:
            part = Run(run.label, [run.results[i] for i in picked], [run.latencies[i] for i in picked])
            cells.append(summary_row(part, sub)[2])
        rows.append([package, str(len(picked)), *cells])
    print_table("MRR@10 by package", ["package", "questions", *(r.label for r in runs[:5])], rows)


if __name__ == "__main__":
    main()
