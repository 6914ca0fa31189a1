"""Reciprocal rank fusion: merge ranked lists whose scores are not comparable (ts_rank-based
coverage and cosine similarity) by rank alone."""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

from .model import Hit

# The constant from Cormack, Clarke and Büttcher (2009): it damps the gap between the first
# few ranks so one list's top hit cannot outvote agreement between the lists.
K = 60


def reciprocal_rank_fusion(ranked_lists: list[list[Hit]], k: int = K) -> list[Hit]:
    """One hit per document, scored sum(1 / (k + rank)) over the lists it appears in; the
    hit shown (heading, snippet) is the one from the list that ranked it best."""
    scores: dict[UUID, float] = {}
    shown: dict[UUID, tuple[int, Hit]] = {}
    for hits in ranked_lists:
        for rank, hit in enumerate(hits, start=1):
            scores[hit.document_id] = scores.get(hit.document_id, 0.0) + 1.0 / (k + rank)
            if hit.document_id not in shown or rank < shown[hit.document_id][0]:
                shown[hit.document_id] = (rank, hit)
    fused = [replace(shown[doc][1], score=score) for doc, score in scores.items()]
    return sorted(fused, key=lambda hit: (-hit.score, str(hit.document_id)))
