"""Long-page questions (issue 60): does search return the passage that answers, when the answer
is a passage inside a long page? Real FAQ questions of six Debian documentation packages, each
FAQ page indexed whole with its questions removed, among the other pages of the same manuals
(bench/longfaq.py: the sets, what is held out, the folder, and the judgment: a passage counts
when it is mostly the question's answer or holds most of it, by word runs, for every system).

Systems, each returning up to 10 passages (a page and a text) per question:

  this project     a fresh database at head filled by `ingest enqueue` and `ingest work --drain`
                   with the default embedder (WordLlama), then `ingest janitor` and ANALYZE; per
                   mode (default = hybrid, lexical, vector): `search_passages()` of
                   ingestion_pipeline.search (several passages of one document when they are
                   the best) when the package has it and the database answers it, else
                   `search()` (one hit per document) and each hit's whole chunk
                   (`hit_passages`); which one is printed. The time includes reading the chunks
  bm25s            BM25 over the pages cut into ~1,000-character chunks (longfaq.CHUNKING, the
                   project's chunker; each chunk indexed under its page's title)
  WordLlama        the project's embedder over the same chunks, cosine (in memory, exact)
  RRF              reciprocal rank fusion (k 60) of the two lists above, each 50 deep

Metrics per question, averaged: passage MRR@10 (1 / rank of the first relevant passage, 0 past
10), passage recall@10 (a relevant passage among the first 10), right page (the answer's FAQ
page among the first 10), right page, wrong passage (the answer's page among the first 10 but
no relevant passage: a share of all questions); p50/p95 latency at the client (the in-memory
systems' is a floor: no database, no network). Then MRR@10 by the length of the answer's page.

    .venv/bin/python bench/passage_quality.py [--database-url URL] [--keep] [--quick]

--keep keeps the database (and reuses a kept one, migrated to head, without re-indexing: the
search part only); without --database-url it keeps the embedded server's folder too
(KEPT_SERVER). --quick indexes the FAQ pages only (no distractors) and writes no results file
(nor does --results -; the default file is RESULTS).
--one-per-document measures search() even where search_passages() answers; --window N asks
search_passages() for N chunks on each side and judges that context instead of the passage.
Needs the bench extra (bm25s, PyStemmer).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import fusion
import longfaq
import numpy as np
import sphinxindex
from common import ROOT, command_line, connect, create_database, db_uri, drop_database, embedded_server, machine_line
from search_quality import database_exists, git_head, index_counts, index_pages, latency, mean, percentile

import ingestion_pipeline.search as search_package
from ingestion_pipeline import cli
from ingestion_pipeline.db.migrate import migrate
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.search import hit_passages, search
from ingestion_pipeline.settings import load_settings

DATABASE = "bench_passage_quality"
KEPT_SERVER = sphinxindex.CACHE / "passage-quality-server"
RESULTS = ROOT / "bench" / "results" / "passage_quality.md"
DEPTH = 10
LONG = 10_000  # characters: a page at least this long is "long" in the table by length
Passage = tuple[str, str]  # (page name relative to the corpus folder, passage text)
Searcher = Callable[[str], list[Passage]]
Ranked = list[tuple[int, float]]  # (chunk number, score), best first


@dataclass
class Run:
    label: str
    results: list[list[Passage]]  # per question, best first
    latencies: list[float]  # seconds per question


def run_queries(label: str, searcher: Searcher, questions: Sequence[longfaq.Question]) -> Run:
    run = Run(label, [], [])
    for question in questions:
        began = time.perf_counter()
        passages = searcher(question.text)
        run.latencies.append(time.perf_counter() - began)
        run.results.append(passages[:DEPTH])
    return run


# -- the in-memory systems over chunks -------------------------------------------------------


def bm25s_ranker(chunks: list[longfaq.Chunk]) -> Callable[[str, int], Ranked]:
    import bm25s
    import Stemmer

    options = {"stopwords": "en", "stemmer": Stemmer.Stemmer("english"), "show_progress": False}
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{c.title}\n{c.text}" for c in chunks], **options), show_progress=False)

    def rank(text: str, depth: int) -> Ranked:
        tokens = bm25s.tokenize([text], return_ids=False, **options)
        if not tokens[0]:
            return []
        found, scores = retriever.retrieve(tokens, k=depth, show_progress=False)
        return [(int(i), float(s)) for i, s in zip(found[0], scores[0], strict=True) if s > 0]

    return rank


def vector_ranker(chunks: list[longfaq.Chunk], embedder) -> Callable[[str, int], Ranked]:
    matrix = np.asarray(embedder.embed([f"{c.title}\n{c.text}" for c in chunks]), dtype=np.float32)

    def rank(text: str, depth: int) -> Ranked:
        scores = matrix @ np.asarray(embedder.embed([text])[0], dtype=np.float32)
        top = np.argpartition(-scores, min(depth, len(scores) - 1))[:depth]
        best = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in best]

    return rank


def chunk_searchers(chunks: list[longfaq.Chunk], embedder) -> list[tuple[str, Searcher]]:
    lexical, vector = bm25s_ranker(chunks), vector_ranker(chunks, embedder)
    rrf = fusion.rrf(60)

    def passages(numbers: Sequence[int]) -> list[Passage]:
        return [(chunks[i].page, chunks[i].text) for i in numbers[:DEPTH]]

    def fused(text: str) -> list[Passage]:
        lists = [[(str(i), s) for i, s in ranker(text, fusion.DEPTH)] for ranker in (lexical, vector)]
        return passages([int(key) for key in rrf(*lists)])

    return [
        ("bm25s over ~1,000-character chunks", lambda q: passages([i for i, _ in lexical(q, DEPTH)])),
        (f"{embedder.name} over the same chunks", lambda q: passages([i for i, _ in vector(q, DEPTH)])),
        ("RRF (k 60) of those two", fused),
    ]


# -- this project ----------------------------------------------------------------------------


def passages_api(conn, per_document: bool) -> tuple[Callable | None, str]:
    """The package's passages call when it has one and the database answers it (a probe query):
    `search_passages(conn, text, *, limit, embedder, [mode], [window])` returning passages best
    first, each with `source_uri` (or `source_name`) and its text as `content` (or `text`; with
    a window, `context`). Else None: one hit per document. And a line saying which."""
    api = getattr(search_package, "search_passages", None)
    if api is None or per_document:
        why = "--one-per-document" if api else "the package has no search_passages"
        return None, f"search() + hit_passages, one passage per document ({why})"
    try:
        api(conn, "probe", mode="lexical", limit=1)
    except IngestError as exc:
        print(f"search_passages() refused: {exc}")
        return None, f"search() + hit_passages, one passage per document (search_passages refused: {exc})"
    return api, "search_passages()"


def passage_text(found, window: int) -> str:
    for name in ("context",) * (window > 0) + ("content", "text", "passage", "snippet"):
        if isinstance(value := getattr(found, name, None), str):
            return value
    raise TypeError(f"a passage of search_passages() without a text: {found!r}")


def ours(conn, names: dict[str, str], mode: str | None, embedder, api: Callable | None, window: int) -> Searcher:
    """The project's passages for a question: through the passages API `api`, else one hit per
    document and each hit's whole chunk."""
    options = {} if mode is None else {"mode": mode}
    wide = {"window": window} if window else {}

    def name_of(found) -> str:
        return names.get(getattr(found, "source_uri", None) or "", getattr(found, "source_name", ""))

    def searcher(text: str) -> list[Passage]:
        try:
            if api is not None:
                found = api(conn, text, limit=DEPTH, embedder=embedder, **options, **wide)
                return [(name_of(p), passage_text(p, window)) for p in found]
            hits = search(conn, text, limit=DEPTH, embedder=embedder, **options)
        except IngestError as exc:
            print(f"refused: {text!r}: {exc}")
            return []
        return [(name_of(hit), chunk) for hit, chunk in zip(hits, hit_passages(conn, hits), strict=True)]

    return searcher


def fill(server: str, files: list, name: str, keep: bool) -> tuple[str, str]:
    """The database's URI, and a line saying how it was filled."""
    uri = db_uri(server, name)
    if keep and database_exists(server, name):
        migrate(uri)  # new search functions apply; what was indexed stays as it was
        return uri, f"reused the kept {name} (migrated to head, not re-indexed)"
    uri = create_database(server, name, migrate=True)
    began = time.monotonic()
    index_pages(uri, files, batch="faq long pages")
    if cli.main(["janitor", "--database-url", uri]) != 0:
        raise SystemExit("ingest janitor failed")
    with connect(uri) as conn:
        conn.execute("analyze")
    return uri, f"{name}: indexed in {time.monotonic() - began:.0f} s (enqueue, work --drain, janitor, analyze)"


# -- metrics and the report ------------------------------------------------------------------


@dataclass(frozen=True)
class Scores:
    reciprocal: float
    found: bool
    right_page: bool
    wrong_passage: bool


def score(question: longfaq.Question, judge: longfaq.Judge, passages: Sequence[Passage]) -> Scores:
    relevant = [judge(text) for _page, text in passages[:DEPTH]]
    first = next((rank for rank, hit in enumerate(relevant, start=1) if hit), None)
    page = any(name == question.page for name, _text in passages[:DEPTH])
    return Scores(1 / first if first else 0.0, first is not None, page, page and first is None)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [headers, ["---"] * len(headers), *rows]
    return "\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines)


def report(corpus: longfaq.LongCorpus, questions: list[longfaq.Question], runs: list[Run]) -> str:
    judges = [longfaq.Judge(q.answer) for q in questions]
    scores = {
        run.label: [score(q, j, r) for q, j, r in zip(questions, judges, run.results, strict=True)] for run in runs
    }
    heads = [f"{len(questions)} questions", "passage MRR@10", "passage recall@10", "right page@10"]
    rows = []
    for run in runs:
        s = scores[run.label]
        metrics = [mean([x.reciprocal for x in s]), mean([x.found for x in s]), mean([x.right_page for x in s])]
        wrong = mean([x.wrong_passage for x in s])
        times = [latency(percentile(run.latencies, p)) for p in (50, 95)]
        rows.append([run.label, *(f"{m:.3f}" for m in metrics), f"{wrong:.0%}", *times])
    main = table([*heads, "right page, wrong passage", "p50", "p95"], rows)
    long = [i for i, q in enumerate(questions) if corpus.chars[q.page] >= LONG]
    short = [i for i in range(len(questions)) if i not in long]
    by_length = [
        [run.label, *(f"{mean([scores[run.label][i].reciprocal for i in part]):.3f}" for part in (long, short))]
        for run in runs
    ]
    parts = [f"pages ≥ {LONG:,} characters ({len(long)} questions)", f"shorter pages ({len(short)})"]
    return main + "\n\nPassage MRR@10 by the length of the answer's page:\n\n" + table(["system", *parts], by_length)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the database")
    parser.add_argument("--database", default=DATABASE, help=f"its name (default {DATABASE}, --quick: …_quick)")
    parser.add_argument("--quick", action="store_true", help="the FAQ pages only, no distractors; no results file")
    parser.add_argument(
        "--one-per-document", action="store_true", help="the project through search() even if search_passages exists"
    )
    parser.add_argument("--results", default=str(RESULTS), help="the markdown file written (- for none)")
    parser.add_argument("--window", type=int, default=0, help="search_passages' window, judged on its context")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    header = [f"$ {command_line()}", f"HEAD: {git_head()}"]
    print("\n".join(header), flush=True)
    corpus = longfaq.load()
    files = [p for p in corpus.files if not args.quick or corpus.name(p).startswith("long/")]
    name = args.database + ("_quick" if args.quick else "")
    embedder = embedder_from_settings(load_settings())
    chunks = longfaq.chunks(corpus, files)
    if args.database_url:
        server_cm = contextlib.nullcontext(args.database_url)
    else:  # with --keep, a server kept in KEPT_SERVER, so that a kept database outlives the run
        server_cm = embedded_server(data_dir=KEPT_SERVER) if args.keep else embedded_server()
    with server_cm as server:
        header.append(machine_line(server))
        print(header[-1], flush=True)
        uri, filled = fill(server, files, name, args.keep)
        header.append(filled)
        print(filled, flush=True)
        try:
            with connect(uri) as conn:
                names = {p.as_uri(): corpus.name(p) for p in files}
                api, path = passages_api(conn, args.one_per_document)
                runs = [
                    run_queries(
                        f"this project, {mode or 'default (hybrid)'}",
                        ours(conn, names, mode, embedder, api, args.window),
                        corpus.questions,
                    )
                    for mode in (None, "lexical", "vector")
                ]
                counts = index_counts(conn)
        finally:
            if not args.keep:
                drop_database(server, name)
    runs += [run_queries(label, searcher, corpus.questions) for label, searcher in chunk_searchers(chunks, embedder)]
    pages = sorted(corpus.chars.values())
    summary = (
        f"{len(corpus.questions)} questions in {len(pages)} FAQ pages kept whole ({pages[0]:,}-{pages[-1]:,}"
        f" characters of text) among {len(files)} documents; the project: {counts}, through {path};"
        f" the in-memory systems: {len(chunks):,} chunks; embedder {embedder.name}"
    )
    text = report(corpus, corpus.questions, runs)
    print(f"\n{summary}\n\n{text}")
    if not args.quick and args.results != "-":
        body = "\n".join(["# passage_quality.py: long-page questions (issue 60)", "", "```", *header, "```"])
        Path(args.results).write_text(f"{body}\n\n{summary}\n\n{text}\n", encoding="utf-8")
        print(f"\nwritten {args.results}")


if __name__ == "__main__":
    main()
