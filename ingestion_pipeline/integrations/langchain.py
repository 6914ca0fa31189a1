"""A LangChain retriever over the index (the langchain extra: docs/integrations.md): each
query is one search of `Index.search`, so collections, the reader's scope, the mode and
top-k apply as they do to `ingest search` (docs/integrations.md, "LangChain")."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, PrivateAttr

from ingestion_pipeline.api import Hit, Index, Reader
from ingestion_pipeline.extras import missing_extra
from ingestion_pipeline.search import Mode

from .retrieval import DEFAULT_TOP_K, ClosesItsScope, Scope, scope_of, source_id, source_metadata

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ModuleNotFoundError as exc:  # without the extra: one line naming it, not a traceback of LangChain's
    if (exc.name or "").split(".")[0] != "langchain_core":
        raise
    raise missing_extra(__name__, "langchain", exc) from None

__all__ = ["IngestionRetriever"]


class IngestionRetriever(ClosesItsScope, BaseRetriever):
    """`Document`s of what `ingest` indexed, best first: the best passages, several of one
    document when they are the best, each with its source in `metadata` (source_uri, title,
    heading_path, page, score, …).

    `index`: an open `Index`; none opens the database `ingest` uses (DATABASE_URL, else the
    embedded server), closed by `close()`. `collections`: only these (default: every one
    the caller may read). `reader`: as that app reader (Reader(user_id); Reader() is anon).
    `mode`: lexical, vector or hybrid (default as `ingest search`). `top_k`: at most so many."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Index | None = None
    collections: str | list[str] | None = None
    reader: Reader | None = None
    mode: Mode | None = None
    top_k: int = DEFAULT_TOP_K

    _scope: Scope = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._scope = scope_of(self.index, self.collections, self.reader, self.mode, self.top_k)
        self.index = self._scope.index

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [_document(hit, text) for hit, text in self._scope.search(query)]


def _document(hit: Hit, text: str) -> Document:
    return Document(id=source_id(hit), page_content=text, metadata=source_metadata(hit))
