"""Ranking quality over judged queries: recall@5 (the expected document among the first 5
results), MRR@10 (1/rank of the expected document within the first 10, else 0), and the
rank of each query. Used by the relevance tests and bench/relevance.py; a judgments file is
a JSON list of {"query", "expected" (a result's source name), "kind"}."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

RECALL_DEPTH = 5
MRR_DEPTH = 10
SUMMARY_HEADERS = ["ranking", "queries", "recall@5", "MRR@10", "first"]


@dataclass(frozen=True)
class Query:
    text: str
    expected: str  # the source name of the document that answers it (a Hit's source_name)
    kind: str  # what sort of query it is (keyword, topic, question, ...), for per-kind tables


@dataclass(frozen=True)
class Ranked:
    query: Query
    rank: int | None  # 1-based position of the expected document, None when absent from the results
    top: str | None  # what came first


@dataclass(frozen=True)
class Summary:
    queries: int
    recall_at_5: float
    mrr_at_10: float
    first: int  # queries whose expected document came first

    def row(self, label: str) -> list[str]:
        return [label, str(self.queries), f"{self.recall_at_5:.3f}", f"{self.mrr_at_10:.3f}", str(self.first)]


def load_judgments(path: Path) -> list[Query]:
    return [Query(item["query"], item["expected"], item["kind"]) for item in json.loads(path.read_text("utf-8"))]


def rank_of(expected: str, results: Sequence[str]) -> int | None:
    """Position (1-based) of the first result equal to `expected`."""
    return next((position for position, name in enumerate(results, start=1) if name == expected), None)


def rank_queries(queries: Sequence[Query], results_for: Callable[[str], Sequence[str]]) -> list[Ranked]:
    """`results_for(text)`: the source names a search returned, best first."""
    ranked = []
    for query in queries:
        results = list(results_for(query.text))
        ranked.append(Ranked(query, rank_of(query.expected, results), results[0] if results else None))
    return ranked


def reciprocal(rank: int | None, depth: int = MRR_DEPTH) -> float:
    return 1.0 / rank if rank is not None and rank <= depth else 0.0


def summarize(ranks: Sequence[int | None]) -> Summary:
    if not ranks:
        raise ValueError("no queries to summarize")
    recalled = sum(1 for rank in ranks if rank is not None and rank <= RECALL_DEPTH)
    return Summary(
        queries=len(ranks),
        recall_at_5=recalled / len(ranks),
        mrr_at_10=sum(reciprocal(rank) for rank in ranks) / len(ranks),
        first=sum(1 for rank in ranks if rank == 1),
    )


def rank_cell(rank: int | None) -> str:
    return "-" if rank is None else str(rank)  # "-": not in the results at all
