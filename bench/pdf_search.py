"""Search on the PDF corpus for bench/pdf_quality.py: the queries, this project's search over
the PDFs indexed the way users index them, and bm25s over each reader's pages.

Queries: per document up to --queries sentences of 10 words or more of the HTML twin (seeded
draw) that pdftotext prints on exactly one page (the sentence's normalized text is in that
page's normalized text and in no other): that page is the answer. Where another document of
the corpus prints the same sentence (twins: one source rendered by two toolchains, such as
groff-man and groff-man-gs), its page is an answer too: no ranking can tell which twin a
sentence came from, so counting only one made those queries coin flips. A third of each sentence's
words (rounded down) are dropped at seeded random positions; the query is the words left,
with characters other than letters, digits, spaces and `.,:;'/()` removed.

This project: every PDF enqueued in one batch (`ingest enqueue`), `ingest work --drain`
(parsing in its threads; the default embedder, WordLlama, as `ingest work` uses it),
`ingest janitor`, ANALYZE, then search(conn, query, limit=1, embedder=the default one) in
the default mode (hybrid when the embedder makes vectors); the top hit's document and its
`.page`. bm25s: each page of a reader's text one document (bench/baselines.py's settings:
English stop words, Snowball stemmer), the top page's document and number.
"""

from __future__ import annotations

import itertools
import random
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from baselines import bm25s_searcher
from bookindex import Page
from common import connect, create_database, drop_database
from pdf_metrics import norm, sentences

from ingestion_pipeline import cli
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.search import search
from ingestion_pipeline.settings import load_settings

DATABASE = "bench_pdf_quality"
_QUERY_JUNK = re.compile(r"[^\w\s.,:;'/()]")


@dataclass(frozen=True)
class Query:
    document: str
    page: int  # from 1
    text: str
    twins: tuple[tuple[str, int], ...] = ()  # (document, page) elsewhere that prints the sentence

    def answered_by(self, document: str, page: int | None) -> tuple[bool, bool]:
        """Whether a top hit in `document` (at `page`) is the right document, the right page."""
        right = {(self.document, self.page), *self.twins}
        return document in {d for d, _ in right}, (document, page) in right


@dataclass
class Answers:
    label: str
    document: list[bool]
    page: list[bool]

    def shares(self) -> tuple[float, float]:
        n = len(self.document) or 1
        return sum(self.document) / n, sum(self.page) / n


def make_queries(
    document: str, raw_paragraphs: Sequence[str], pages: Mapping[str, Sequence[str]], count: int, seed: int
) -> list[Query]:
    """`pages`: pdftotext's pages of every document of the corpus (the others': for twins)."""
    padded_pages = [f" {norm(page)} " for page in pages[document]]
    padded_others = {name: [f" {norm(page)} " for page in texts] for name, texts in pages.items() if name != document}
    candidates = list(dict.fromkeys(sentences(raw_paragraphs)))
    rng = random.Random(seed * 1_000_003 + zlib.crc32(document.encode()))
    rng.shuffle(candidates)
    queries: list[Query] = []
    for sentence in candidates:
        if len(queries) == count:
            break
        needle = f" {norm(sentence)} "
        on = [i for i, page in enumerate(padded_pages) if needle in page]
        if len(on) != 1:
            continue
        words = sentence.split()
        dropped = set(rng.sample(range(len(words)), len(words) // 3))
        kept = " ".join(w for i, w in enumerate(words) if i not in dropped)
        text = " ".join(_QUERY_JUNK.sub(" ", kept).split())
        if text:
            twins = tuple(
                (name, i + 1) for name, texts in padded_others.items() for i, page in enumerate(texts) if needle in page
            )
            queries.append(Query(document, on[0] + 1, text, twins))
    return queries


def bm25s_answers(label: str, pages: dict[str, tuple[list[str], list[int]]], queries: Sequence[Query]) -> Answers:
    """`pages`: per document its page texts and the page number each names."""
    index = [
        Page(f"{document}\x00{number}", "", text)
        for document, (texts, numbers) in pages.items()
        for text, number in zip(texts, numbers, strict=True)
    ]
    _name, searcher = bm25s_searcher(index)
    answers = Answers(label, [], [])
    for query in queries:
        top = searcher(query.text)[:1]
        document, _, page = top[0].partition("\x00") if top else ("", "", "0")
        right_document, right_page = query.answered_by(document, int(page))
        answers.document.append(right_document)
        answers.page.append(right_page)
    return answers


def project_answers(server: str, files: dict[str, Path], queries: Sequence[Query], keep: bool) -> dict[str, Answers]:
    """Index `files` (document name -> PDF) in a fresh database and ask each query in each mode:
    the default (hybrid), lexical and vector (issue 60: the default loses to neither)."""
    uri = create_database(server, DATABASE, migrate=True)
    try:
        common = ["--database-url", uri]
        if cli.main(["enqueue", *map(str, files.values()), "--batch", "pdf corpus", *common]) != 0:
            raise SystemExit("ingest enqueue failed")
        if cli.main(["work", "--drain", "--parse-processes", "0", *common]) != 0:
            raise SystemExit("ingest work failed")
        if cli.main(["janitor", *common]) != 0:
            raise SystemExit("ingest janitor failed")
        names = {path.resolve().as_uri(): name for name, path in files.items()}
        names |= {path.name: name for name, path in files.items()}
        embedder = embedder_from_settings(load_settings())
        modes = {"default": None, "lexical": "lexical", "vector": "vector"}
        found = {key: Answers(f"this project (ingest search, {key} mode)", [], []) for key in modes}
        with connect(uri) as conn:
            conn.execute("analyze")
            counts = conn.execute(
                "select count(*) filter (where status = 'indexed') as indexed, count(*) as documents from documents"
            ).fetchone()
            print(f"indexed {counts['indexed']} of {counts['documents']} PDFs", flush=True)
            for (key, mode), query in itertools.product(modes.items(), queries):
                try:
                    hits = search(conn, query.text, limit=1, embedder=embedder, mode=mode)
                except IngestError:
                    hits = []
                top = hits[0] if hits else None
                document = "" if top is None else names.get(top.source_uri or "") or names.get(top.source_name, "")
                right_document, right_page = query.answered_by(document, None if top is None else top.page)
                found[key].document.append(right_document)
                found[key].page.append(right_page)
        return found
    finally:
        if not keep:
            drop_database(server, DATABASE)
