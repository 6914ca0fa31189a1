"""Search relevance on a corpus of project-written HTML pages (a database operations manual)
and natural queries, each with the page that answers it: lexical search must put the
answer among the first 5 results almost always (recall@5 >= 0.95) and near the top
(MRR@10 >= 0.85). The per-query table is printed (pytest -s, or shown on failure)."""

from __future__ import annotations

import pytest

from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import parse
from ingestion_pipeline.search import search
from ingestion_pipeline.search.evaluation import SUMMARY_HEADERS, rank_queries, summarize

from .corpus import KINDS, PAGES, load_queries, page_names, per_query_table

MIN_RECALL_AT_5 = 0.95
MIN_MRR_AT_10 = 0.85


def test_lexical_search_puts_the_answering_page_near_the_top(relevance_db: str) -> None:
    with connect(relevance_db) as conn:
        ranked = rank_queries(
            load_queries(), lambda text: [hit.source_name for hit in search(conn, text, mode="lexical", limit=10)]
        )
    summary = summarize([r.rank for r in ranked])
    report = per_query_table(ranked) + "\n\n" + render_table(SUMMARY_HEADERS, [summary.row("lexical")])
    print("\n" + report)
    assert summary.recall_at_5 >= MIN_RECALL_AT_5 and summary.mrr_at_10 >= MIN_MRR_AT_10, report


def test_corpus_is_what_the_relevance_test_claims() -> None:
    """The queries point at pages that exist, are of the kinds the test reports, and there
    are enough of them; each page parses with a title and headings, within 2-40 KB."""
    queries = load_queries()
    names = set(page_names())
    assert len(queries) >= 30 and len(names) >= 35
    assert {q.expected for q in queries} <= names
    assert {q.kind for q in queries} == set(KINDS)
    assert len({q.text for q in queries}) == len(queries), "a query is listed twice"
    for name in names:
        content = (PAGES / name).read_bytes()
        assert 2_000 <= len(content) <= 40_000, name
        parsed = parse(content, name, max_bytes=len(content))
        assert parsed.title and len([s for s in parsed.sections if s.heading]) >= 3, name


@pytest.mark.parametrize(
    "ranks, recall, mrr",
    [
        ([1, 1, 1, 1], 1.0, 1.0),
        ([1, 5, 6, None], 0.5, (1 + 1 / 5 + 1 / 6) / 4),
        ([11, None], 0.0, 0.0),
    ],
)
def test_metrics(ranks, recall, mrr) -> None:
    summary = summarize(ranks)
    assert summary.recall_at_5 == pytest.approx(recall) and summary.mrr_at_10 == pytest.approx(mrr)
