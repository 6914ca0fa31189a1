"""The whole passage of each hit: a hit's snippet is a few words around the query's terms
(at most 30), its best chunk is what a model needs to answer from (up to INGEST_CHUNK_CHARS).

Read through `readable_document_chunks`, the RPC apps read chunks with, as the same reader
the search ran as: a passage is never more than the reader may read."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from ingestion_pipeline.db.queries import query

from .model import Hit
from .rpc import Reader, as_reader

H = TypeVar("H", bound=Hit)


def hit_passages(conn: psycopg.Connection[Any], hits: Sequence[Hit], *, reader: Reader | None = None) -> list[str]:
    """Each hit's best chunk, in the order of `hits`. A chunk that is gone (its document
    deleted since the search, or its reader may no longer read it) gives the hit's snippet;
    a document reindexed since gives the same ordinal's chunk of its new build."""
    if not hits:
        return []
    params = {"document_ids": [hit.document_id for hit in hits], "ordinals": [hit.chunk_ordinal for hit in hits]}
    with as_reader(conn, reader), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("hit_passages"), params).fetchall()
    found = {(row["document_id"], row["chunk_ordinal"]): row["content"] for row in rows}
    return [found.get((hit.document_id, hit.chunk_ordinal), hit.snippet) for hit in hits]


def with_page_labels(conn: psycopg.Connection[Any], hits: list[H], *, reader: Reader | None = None) -> list[H]:
    """The hits, each with its page's label where its PDF defines labels ("iv" for the fourth
    page of a preface): a viewer shows the label, and a reader looks for it."""
    paged = [hit for hit in hits if hit.page is not None]
    if not paged:
        return hits
    params = {"document_ids": [hit.document_id for hit in paged], "pages": [hit.page for hit in paged]}
    with as_reader(conn, reader), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("hit_page_labels"), params).fetchall()
    labels = {(row["document_id"], row["page"]): row["page_label"] for row in rows}
    return [dataclasses.replace(hit, page_label=labels.get((hit.document_id, hit.page))) for hit in hits]
