"""Ways to fuse a lexical and a vector result list into one ranking, computed in memory from
the two lists the search RPC returns (each up to DEPTH documents, best first, with scores):
how bench/question_quality.py and bench/search_quality.py compare candidate fusions before one
is written in SQL.

  rrf k           reciprocal rank fusion: sum of 1 / (k + rank) over the lists a document is in
  rrf k w         the same with the lexical list weighted w and the vector list 1 - w
  convex a        a * lexical score / best lexical score + (1 - a) * cosine (Weaviate's
                  "relative score" idea, with the lexical list scaled by its first score)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Ranked = Sequence[tuple[str, float]]  # (page name, score), best first
Fusion = Callable[[Ranked, Ranked], list[str]]
DEPTH = 50


def rrf(k: float, weight: float = 0.5) -> Fusion:
    def fuse(lexical: Ranked, vector: Ranked) -> list[str]:
        scores: dict[str, float] = {}
        for share, ranked in ((weight, lexical), (1 - weight, vector)):
            for rank, (name, _score) in enumerate(ranked, start=1):
                scores[name] = scores.get(name, 0.0) + share / (k + rank)
        return _order(scores)

    return fuse


def convex(alpha: float) -> Fusion:
    def fuse(lexical: Ranked, vector: Ranked) -> list[str]:
        scores: dict[str, float] = {}
        top = lexical[0][1] if lexical and lexical[0][1] > 0 else 1.0
        for name, score in lexical:
            scores[name] = alpha * score / top
        for name, score in vector:
            scores[name] = scores.get(name, 0.0) + (1 - alpha) * max(score, 0.0)
        return _order(scores)

    return fuse


def _order(scores: dict[str, float]) -> list[str]:
    return [name for name, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


CANDIDATES: dict[str, Fusion] = {
    "rrf 60": rrf(60),
    "rrf 20": rrf(20),
    "rrf 60 w0.3": rrf(60, 0.3),
    "rrf 60 w0.7": rrf(60, 0.7),
    "convex 0.2": convex(0.2),
    "convex 0.3": convex(0.3),
    "convex 0.5": convex(0.5),
    "convex 0.7": convex(0.7),
}


def fused(lexical: list[Ranked], vector: list[Ranked], depth: int = 10) -> dict[str, list[list[str]]]:
    """Per candidate: each query's fused ranking, `depth` deep."""
    return {
        label: [fuse(lex, vec)[:depth] for lex, vec in zip(lexical, vector, strict=True)]
        for label, fuse in CANDIDATES.items()
    }
