"""Search quality on documentation nobody here tuned for (issues 35, 46): this project's
lexical search against two BM25 baselines, on each corpus of bench/corpora.py, judged by the
corpus's own index (queries its authors wrote).

  postgres    PostgreSQL 15 manual, 1,168 pages, back-of-book index (bench/bookindex.py)
  sphinx      Sphinx 5.3 manual, 94 pages, general index (bench/sphinxindex.py)
  sqlalchemy  SQLAlchemy 1.4 documentation, 164 pages, general index

Per corpus, --queries index entries (default 1,000) are drawn with --seed; what was left out
of the index is counted and printed. Systems, each returning up to 10 page names per query:

  ours     a fresh database at head filled by `ingest enqueue` (every page, one batch) and
           `ingest work --drain`, then `ingest janitor` (its last pass folds the search term
           counts) and ANALYZE (what the schedule and autovacuum would do; --no-analyze skips
           the ANALYZE), then ingestion_pipeline.search.search(conn, q, mode="lexical", limit=10):
           one hit per page, named by its path under the corpus folder. Timed at the client.
  bm25s, tantivy   in memory, over each page's title and text (bench/baselines.py).

Metrics per query, averaged (binary relevance; R = min(relevant pages, 10)): recall@10 =
relevant pages among the first 10 / R; MRR@10 = 1 / rank of the first relevant page (0 past
10); nDCG@10 = sum of 1/log2(rank + 1) over relevant pages in the first 10, over the same for
R pages at ranks 1..R. Latency p50/p95/max per system; nDCG@10 by kind of query.

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
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import corpora
import fusion
from baselines import Searcher, bm25s_searcher, tantivy_searcher
from bookindex import MANUAL, Judgment, sample
from common import (
    ROOT,
    command_line,
    connect,
    create_database,
    db_uri,
    drop_database,
    embedded_server,
    machine_line,
    percentile,
    print_table,
)

from ingestion_pipeline import cli
from ingestion_pipeline.db.migrate import migrate
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.search import search
from ingestion_pipeline.settings import load_settings

DATABASE = "bench_search_quality"
DEPTH = 10
METRICS = ["recall@10", "MRR@10", "nDCG@10", "p50", "p95", "max"]
KINDS = ["single word", "multi-word", "identifier", "qualified name", "option"]


@dataclass
class Run:
    label: str
    results: list[list[str]]  # per query, page file names best first
    latencies: list[float]  # seconds per query


def run_queries(label: str, searcher: Searcher, queries: Sequence[Judgment]) -> Run:
    run = Run(label, [], [])
    for judgment in queries:
        began = time.perf_counter()
        names = searcher(judgment.query)
        run.latencies.append(time.perf_counter() - began)
        run.results.append(names[:DEPTH])
    return run


# -- ours -------------------------------------------------------------------------------


def index_pages(uri: str, files: list[Path], *work_options: str, batch: str = "postgresql 15 manual") -> None:
    """Every page in one batch, drained by `ingest work` (parsing in its threads; with
    `work_options`, e.g. an embedder: bench/search_latency.py)."""
    common = ["--database-url", uri]
    if cli.main(["enqueue", *map(str, files), "--batch", batch, *common]) != 0:
        raise SystemExit("ingest enqueue failed")
    if cli.main(["work", "--drain", "--parse-processes", "0", *work_options, *common]) != 0:
        raise SystemExit("ingest work failed")


def measure_ours(server: str, corpus: corpora.Corpus, queries: list[Judgment], args: argparse.Namespace) -> list[Run]:
    name = f"{DATABASE}_{corpus.name}"
    uri = db_uri(server, name)
    reuse = args.keep and database_exists(server, name)
    if reuse:
        migrate(uri)  # new search functions apply; stored vectors stay as they were indexed
    else:
        uri = create_database(server, name, migrate=True)
    try:
        began = time.monotonic()
        if not reuse:
            index_pages(uri, corpus.files, batch=corpus.name)
            if cli.main(["janitor", "--database-url", uri]) != 0:  # folds the term counts, as the schedule would
                raise SystemExit("ingest janitor failed")
        with connect(uri) as conn:
            if args.analyze and not reuse:
                conn.execute("analyze")
            done = "reused" if reuse else f"indexed in {time.monotonic() - began:.0f} s"
            print(f"{corpus.name}: {done}: {index_counts(conn)}", flush=True)
            errors: list[str] = []
            names = {path.as_uri(): corpus.page_name(path) for path in corpus.files}
            embedder = embedder_from_settings(load_settings())
            runs = [
                run_queries(
                    f"this project, {mode or 'default'}",
                    lambda q, mode=mode: _ours(conn, q, names, errors, mode, embedder),
                    queries,
                )
                for mode in ("lexical", None)
            ]
            if args.fusions:
                runs += fusion_runs(conn, queries, names, embedder)
        if errors:
            print(f"{len(errors)} queries refused by search(), counted as no results: {errors[:5]}")
        return runs
    finally:
        if not args.keep:
            drop_database(server, name)


def database_exists(server: str, name: str) -> bool:
    with connect(server) as conn:
        return conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone() is not None


def fusion_runs(conn, queries: list[Judgment], names: dict[str, str], embedder) -> list[Run]:
    """bench/fusion.py's candidates over the lexical and vector lists, 50 deep."""
    lists: dict[str, list[fusion.Ranked]] = {"lexical": [], "vector": []}
    for judgment in queries:
        for mode, ranked in lists.items():
            hits = search(conn, judgment.query, mode=mode, limit=fusion.DEPTH, embedder=embedder)  # type: ignore[arg-type]
            ranked.append([(names.get(h.source_uri or "", h.source_name), h.score) for h in hits])
    zero = [0.0] * len(queries)
    return [Run(f"fusion: {k}", r, zero) for k, r in fusion.fused(lists["lexical"], lists["vector"]).items()]


def _ours(conn, text: str, names: dict[str, str], errors: list[str], mode=None, embedder=None) -> list[str]:
    try:
        hits = search(conn, text, mode=mode, limit=DEPTH, embedder=embedder)
    except IngestError as exc:
        errors.append(f"{text!r}: {exc}")
        return []
    return [names.get(hit.source_uri, hit.source_name) for hit in hits]


def index_counts(conn) -> str:
    docs = conn.execute("select status, count(*) as n from documents group by status order by status").fetchall()
    chunks = conn.execute("select count(*) as n from document_chunks").fetchone()["n"]
    return ", ".join(f"{row['n']} documents {row['status']}" for row in docs) + f", {chunks} chunks"


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
        if not picked:
            continue
        cells = []
        for run in runs:
            scores = [score(queries[i].relevant, run.results[i]) for i in picked]
            cells.append(f"{mean([s.recall for s in scores]):.3f} / {mean([s.ndcg for s in scores]):.3f}")
        rows.append([kind, str(len(picked)), *cells])
    return rows


# -- the run ----------------------------------------------------------------------------


def git_head() -> str:
    """HEAD's short hash, date and subject; flagged when the package or its SQL differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    changed = git("status", "--porcelain", "--", "ingestion_pipeline", "migrations")
    return git("log", "-1", "--format=%h %cs %s")[:90] + (" (+ uncommitted package changes)" if changed else "")


def print_report(corpus: corpora.Corpus, runs: list[Run], queries: list[Judgment], seed: int) -> None:
    judged, pages = corpus.judged, len(corpus.files)
    print_table(
        f"{corpus.name} judgments: {judged.entries:,} index entries, {len(judged.queries):,} usable queries",
        ["left out", "entries"],
        [[reason, str(n)] for reason, n in sorted(judged.excluded.items())],
    )
    print_table(
        f"{corpus.name}: search quality, {len(queries):,} sampled queries (seed {seed}), same {pages:,} pages",
        [f"{corpus.name}: {len(queries):,} queries, {pages:,} pages", *METRICS],
        [summary_row(run, queries) for run in runs],
    )
    print_table(
        f"{corpus.name}: recall@10 / nDCG@10 by kind of query",
        ["kind", "queries", *(run.label for run in runs)],
        kind_rows(runs, queries),
    )


def write_per_query(path: Path, runs: list[Run], queries: list[Judgment]) -> None:
    with path.open("a", encoding="utf-8") as out:
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
    parser.add_argument(
        "--corpus",
        action="append",
        choices=corpora.NAMES,
        help="a corpus to measure (repeatable; default: all of them, one after the other)",
    )
    parser.add_argument("--queries", type=int, default=1000, help="index entries to sample per corpus (default 1000)")
    parser.add_argument("--seed", type=int, default=35, help="sampling seed (default 35)")
    parser.add_argument("--manual", type=Path, default=MANUAL, help=f"the manual's html folder (default {MANUAL})")
    parser.add_argument("--no-analyze", dest="analyze", action="store_false", help="search without ANALYZE first")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep each corpus's database (bench_search_quality_<corpus>) and reuse a kept one, migrated to "
        "head but not re-indexed: for trying ranking changes (a change of indexed vectors needs a fresh one)",
    )
    parser.add_argument("--fusions", action="store_true", help="also rank bench/fusion.py's candidate fusions")
    parser.add_argument("--per-query", type=Path, help="append each query's judgment and results as JSON lines here")
    return parser.parse_args()


def measure(server: str, name: str, args: argparse.Namespace) -> None:
    corpus = corpora.load(name, args.manual)
    queries = sample(corpus.judged.queries, args.queries, args.seed)
    pages = corpus.pages()
    runs = [run_queries(*make(pages), queries) for make in (bm25s_searcher, tantivy_searcher)]
    runs[:0] = measure_ours(server, corpus, queries, args)
    print_report(corpus, runs, queries, args.seed)
    if args.per_query:
        write_per_query(args.per_query, runs, queries)


def main() -> None:
    args = parse_args()
    for module in ("bm25s", "tantivy"):
        if importlib.util.find_spec(module) is None:
            raise SystemExit(f"{module} is missing: .venv/bin/pip install -e '.[bench]'")
    print(f"$ {command_line()}")
    print(f"HEAD: {git_head()}", flush=True)
    server_cm = embedded_server() if not args.database_url else contextlib.nullcontext(args.database_url)
    with server_cm as server:
        print(machine_line(server))
        for name in args.corpus or corpora.NAMES:
            measure(server, name, args)


if __name__ == "__main__":
    main()
