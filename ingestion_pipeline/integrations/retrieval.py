"""What both retrievers share: an `Index` passages search in the scope the retriever was
given (collections, reader, mode, top-k), and the metadata each passage carries as a source.

The text they return is each passage whole (`Index.search_passages`: the best chunks, several
of one document when they are the best; the snippet of `ingest search` is a few words of
one), read as the same reader; the metadata says where it came from, so an answer can cite
its sources by `source_uri`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ingestion_pipeline.api import Hit, Index, Reader
from ingestion_pipeline.api.closing import ClosesOnExit
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.search import MODES, Mode

DEFAULT_TOP_K = 5
MAX_TOP_K = 200  # the passages RPC's most

# What a model should see of a source beside its text: what to cite and where to look. The
# ids, the rank and the score are for code (and change with every query or reindex).
SHOWN_TO_MODELS = ("title", "source_uri", "heading_path", "page", "page_label")


@dataclass
class Scope:
    """One retriever's searches: its index (opened on the configured database when none is
    given, as `ingest` opens it, and then closed with the retriever) and what it asks for."""

    index: Index
    collections: list[str] | None
    reader: Reader | None
    mode: Mode | None
    top_k: int
    owns_index: bool = field(default=False)

    def search(self, query: str) -> list[tuple[Hit, str]]:
        """The passages, best first, each with its text."""
        passages = self.index.search_passages(
            query, mode=self.mode, limit=self.top_k, collections=self.collections, reader=self.reader
        )
        return [(passage, passage.content) for passage in passages]

    def close(self) -> None:
        if self.owns_index:
            self.index.close()


class ClosesItsScope(ClosesOnExit):
    """What both retrievers do with the `Scope` they hold (`_scope`): `close()`, and `with`."""

    _scope: Scope

    def close(self) -> None:
        """Close the index this retriever opened (one it was given stays open)."""
        self._scope.close()


def scope_of(
    index: Index | None,
    collections: str | Iterable[str] | None,
    reader: Reader | None,
    mode: Mode | None,
    top_k: int,
) -> Scope:
    """The arguments checked before any connection is opened: a typo fails at construction."""
    if mode is not None and mode not in MODES:
        raise IngestError(f"unknown search mode {mode!r}; choose one of: {', '.join(MODES)}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise IngestError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, not {top_k!r}")
    names = [collections] if isinstance(collections, str) else list(collections or []) or None
    if index is None:
        return Scope(Index.open(), names, reader, mode, top_k, owns_index=True)
    return Scope(index, names, reader, mode, top_k)


def source_id(hit: Hit) -> str:
    """The same id for the same passage of the same document from one query to the next."""
    return f"{hit.document_id}:{hit.chunk_ordinal}"


def source_metadata(hit: Hit) -> dict[str, Any]:
    """A hit's source as flat metadata (strings, numbers, None): what vector stores, tracing
    and the frameworks' serialisation take."""
    return {
        "source_uri": hit.source_uri,
        "title": hit.title,
        "heading_path": hit.heading_path or hit.heading,
        "page": hit.page,
        "page_label": hit.page_label,
        "score": hit.score,
        "source_name": hit.source_name,
        "collection": hit.collection,
        "document_id": str(hit.document_id),
        "chunk_ordinal": hit.chunk_ordinal,
    }
