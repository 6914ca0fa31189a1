"""A LlamaIndex retriever over the index (the llama-index extra: docs/integrations.md):
each query is one search of `Index.search`, so collections, the reader's scope, the mode and
top-k apply as they do to `ingest search` (docs/integrations.md, "LlamaIndex")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from ingestion_pipeline.api import Hit, Index, Reader
from ingestion_pipeline.extras import missing_extra
from ingestion_pipeline.search import Mode

from .retrieval import DEFAULT_TOP_K, SHOWN_TO_MODELS, ClosesItsScope, scope_of, source_id, source_metadata

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ModuleNotFoundError as exc:  # without the extra: one line naming it, not a traceback of LlamaIndex's
    if (exc.name or "").split(".")[0] != "llama_index":
        raise
    raise missing_extra(__name__, "llama-index", exc) from None

__all__ = ["IngestionRetriever"]


class IngestionRetriever(ClosesItsScope, BaseRetriever):
    """Nodes of the documents `ingest` indexed, best first: the best passages, several of one
    document when they are the best, each with its source in `metadata` (source_uri, title,
    heading_path, page, score, …).

    `index`: an open `Index`; none opens the database `ingest` uses (DATABASE_URL, else the
    embedded server), closed by `close()`. `collections`: only these (default: every one
    the caller may read). `reader`: as that app reader (Reader(user_id); Reader() is anon).
    `mode`: lexical, vector or hybrid (default as `ingest search`). `top_k`: at most so many."""

    def __init__(
        self,
        *,
        index: Index | None = None,
        collections: str | Iterable[str] | None = None,
        reader: Reader | None = None,
        mode: Mode | None = None,
        top_k: int = DEFAULT_TOP_K,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self._scope = scope_of(index, collections, reader, mode, top_k)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def index(self) -> Index:
        return self._scope.index

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit, text) for hit, text in self._scope.search(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """In a thread: the search is psycopg's blocking call, and LlamaIndex's default would
        run it on the event loop, stalling every other task while the database answers."""
        return await asyncio.to_thread(self._retrieve, query_bundle)


def _node(hit: Hit, text: str) -> NodeWithScore:
    metadata = source_metadata(hit)
    # The prompt shows a source's title, key, headings and page (not a missing one); the
    # embedding, if a pipeline re-embeds the node, its text alone.
    hidden = [key for key, value in metadata.items() if key not in SHOWN_TO_MODELS or value is None]
    node = TextNode(
        id_=source_id(hit),
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=list(metadata),
    )
    return NodeWithScore(node=node, score=hit.score)
