"""Full-text search that forgives a missing word: pages ranked by how much of the query they
cover (db/sql/search.sql), one hit per page."""

from __future__ import annotations

import psycopg
from psycopg.rows import DictRow, class_row

from ingestion_pipeline.db.queries import query

from .model import Hit
from .terms import split_terms


def lexical_hits(
    conn: psycopg.Connection[DictRow], text: str, limit: int, *, collections: list[str] | None = None
) -> list[Hit]:
    """The `limit` best pages for `text`, of `collections` only (None: of all)."""
    terms = split_terms(text)
    if not terms.included:
        return []  # only excluded terms: nothing to rank by
    params = {
        "included": terms.included,
        "any_included": terms.any_included,
        "any_excluded": terms.any_excluded,
        "collections": collections,
        "limit": limit,
    }
    with conn.cursor(row_factory=class_row(Hit)) as cur:
        return cur.execute(query("search_lexical"), params).fetchall()
