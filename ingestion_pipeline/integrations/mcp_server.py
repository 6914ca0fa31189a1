"""The MCP server of `ingest mcp` (docs/mcp.md): three read-only tools over an `Index`,
`search`, `show_document` and `status`, for an agent, on the official MCP Python SDK
(its `MCPServer`, once called FastMCP); mcp_transports.py runs it over stdio or streamable
HTTP on 127.0.0.1, and mcp_status.py makes the `status` tool's result.

What a tool sees is what the server was started with: the collections it serves (none named:
every one) and the reader it reads as (`Reader`: an app user, or anonymous; none: the
connecting role), the same scoping `ingest search --as-user` applies; to a reader a collection
it may not read is one that does not exist, in the same words. Results are sized for a
model's context: a few hits with short snippets, a document's text a page at a time, the
latest batches and failures, each cut marked as such. A refused argument or a failed call is
an MCP error result carrying one line (IngestError's), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar
from uuid import UUID

import psycopg
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from ingestion_pipeline.api import Document, DocumentNotFound, Hit, Index, IngestError, Reader, Section
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.errors import UnknownCollection, first_line
from ingestion_pipeline.operations.lookup import parse_ref
from ingestion_pipeline.search import Mode

from .mcp_errors import OneLineErrorServer
from .mcp_status import MESSAGE_CHARS, STATUS_COLLECTIONS, StatusResult, collection_status, cut

# What one call may return: sized for a model's context window.
DEFAULT_RESULTS = 5
MAX_RESULTS = 20
SNIPPET_CHARS = 400
DEFAULT_TEXT_CHARS = 6_000
MAX_TEXT_CHARS = 20_000
MAX_QUERY_CHARS = 1_000

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


@dataclass(frozen=True)
class Scope:
    """What the server serves: `collections` (empty: every one) as `reader` (None: as the
    database role it connects as, which reads every collection when it owns the schema)."""

    collections: tuple[str, ...] = ()
    reader: Reader | None = None


# The tools' results. Field descriptions reach the client as the output schema.


class SearchHit(BaseModel):
    rank: int
    title: str
    source_uri: str | None = Field(description="the document's source key: pass it to show_document")
    collection: str
    heading_path: str | None = Field(description="the headings above the best passage, outermost first")
    page: int | None = Field(description="the best passage's page, from 1; null for a format without pages")
    page_label: str | None = Field(
        default=None, description="that page's label where the PDF defines labels ('iv'); else null"
    )
    score: float
    snippet: str = Field(description="words of the best passage around the query's terms")
    snippet_truncated: bool
    document_id: str


class SearchResult(BaseModel):
    query: str
    mode: str | None
    collections: list[str] | None = Field(description="the collections searched; null: every one the reader may read")
    results: list[SearchHit]
    may_have_more: bool = Field(description="true when `limit` results came back: a larger limit may find more")


class DocumentText(BaseModel):
    document_id: str
    title: str
    source_uri: str | None
    collection: str
    status: str
    latest_version: int | None
    indexed_version: int | None = Field(description="the version search returns; null: none is indexed")
    error_message: str | None = Field(description="why the latest version failed, when it did")
    text: str = Field(description="the indexed version's text from `offset`, at most `max_chars` characters")
    offset: int
    total_chars: int
    truncated: bool = Field(description="true when more text follows: call again with `offset` = next_offset")
    next_offset: int | None


# The tools' arguments: the SDK validates them against these before a tool runs.

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description='words, "phrases", -excluded')]
SearchMode = Annotated[
    Literal["lexical", "vector", "hybrid"] | None,
    Field(description="default: hybrid (lexical when the server has no embedder)"),
]
Limit = Annotated[int, Field(ge=1, le=MAX_RESULTS, description=f"how many documents, 1 to {MAX_RESULTS}")]
Collections = Annotated[
    list[str] | None, Field(description="search only these collections (default: every one this server serves)")
]
DocumentRef = Annotated[
    str, Field(min_length=1, description="a document id, or a source key (source_uri of a search result)")
]
CollectionName = Annotated[
    str | None,
    Field(description="the collection a source key is looked up in (default: the only served one, else 'default')"),
]
StatusCollection = Annotated[str | None, Field(description="one collection (default: every one served)")]
Offset = Annotated[int, Field(ge=0, description="where the text starts (next_offset of the previous call)")]
MaxChars = Annotated[int, Field(ge=1, le=MAX_TEXT_CHARS, description=f"at most this much text, up to {MAX_TEXT_CHARS}")]


class Tools:
    """The three tools over one index, within one scope. Each call reads the database anew:
    a grant or revoke applies to the next call."""

    def __init__(self, index: Index, scope: Scope):
        self.index = index
        self.scope = scope

    def search(self, query: str, mode: Mode | None, limit: int, collections: list[str] | None) -> SearchResult:
        # A named collection the reader may not read is refused as an absent one is (Index.search);
        # none named: the served ones it may read (a served one it may not read refuses nothing).
        names = self._served(collections)
        if not collections and names and self.scope.reader is not None:
            names = self._readable()
            if not names:
                return SearchResult(query=query, mode=mode, collections=[], results=[], may_have_more=False)
        hits = self.index.search(query, mode=mode, limit=limit, collections=names, reader=self.scope.reader)
        return SearchResult(
            query=query,
            mode=mode,
            collections=names,
            results=[_hit(rank, hit) for rank, hit in enumerate(hits, start=1)],
            may_have_more=len(hits) == limit,
        )

    def show_document(self, document: str, collection: str | None, offset: int, max_chars: int) -> DocumentText:
        if collection is not None:
            self._served([collection])
        where = collection or (self.scope.collections[0] if len(self.scope.collections) == 1 else None)
        # What the reader may not read is not found, in the same words as what does not exist.
        by_key = not isinstance(parse_ref(document), UUID)
        missing = DocumentNotFound(
            f"no document {document!r}" + (f" in collection {where or DEFAULT_COLLECTION!r}" if by_key else "")
        )
        if where is not None and not self._may_read(where):
            raise missing
        try:
            found = self.index.show(document, collection=where)
        except DocumentNotFound:
            raise missing from None
        if not self._may_read(found.summary.collection):
            raise missing
        text = _text(self.index.sections(found.document_id, reader=self.scope.reader))
        return _document(found, text, offset, max_chars)

    def status(self, collection: str | None) -> StatusResult:
        if collection is not None:
            self._served([collection])
            if not self._may_read(collection):  # a reader's: in the words used for one that does not exist
                raise UnknownCollection.among(collection, self._readable() or [], to_reader=True)
            scopes: list[str | None] = [collection]
        else:
            allowed = self._readable()
            scopes = [None] if allowed is None else list(allowed)
        shown, rest = scopes[:STATUS_COLLECTIONS], scopes[STATUS_COLLECTIONS:]
        return StatusResult(
            collections=[collection_status(self.index, name, reader=self.scope.reader is not None) for name in shown],
            collections_not_shown=[name for name in rest if name is not None],
        )

    def _served(self, names: list[str] | None) -> list[str] | None:
        """`names`, refused when the server was started for other collections; none named:
        the served ones (None: every collection)."""
        served = self.scope.collections
        if not names:
            return list(served) or None
        others = [name for name in names if served and name not in served]
        if others:
            raise ToolError(
                f"this server does not serve collection(s) {', '.join(map(repr, others))}; "
                f"it serves {', '.join(map(repr, served))}"
            )
        return list(dict.fromkeys(names))

    def _readable(self) -> list[str] | None:
        """The served collections the reader may read (None: every collection)."""
        readable = self.index.readable_collections(reader=self.scope.reader)
        served = list(self.scope.collections) or None
        if readable is None:
            return served
        return [name for name in (served or readable) if name in readable]

    def _may_read(self, collection: str) -> bool:
        allowed = self._readable()
        return allowed is None or collection in allowed


def _hit(rank: int, hit: Hit) -> SearchHit:
    snippet = " ".join(hit.snippet.split())
    return SearchHit(
        rank=rank,
        title=hit.title,
        source_uri=hit.source_uri,
        collection=hit.collection,
        heading_path=hit.heading_path or hit.heading,
        page=hit.page,
        page_label=hit.page_label,
        score=round(hit.score, 4),
        snippet=cut(snippet, SNIPPET_CHARS),
        snippet_truncated=len(snippet) > SNIPPET_CHARS,
        document_id=str(hit.document_id),
    )


def _text(sections: list[Section]) -> str:
    """The sections as Markdown: each heading marked by its level, then its text (a section's
    text starts with its heading's words, which the mark replaces)."""
    parts = []
    for section in sections:
        body = section.content.strip()
        if section.heading:
            body = body.removeprefix(section.heading.strip()).lstrip()
            body = f"{'#' * max(1, min(section.level or 1, 6))} {section.heading.strip()}\n\n{body}"
        parts.append(body.rstrip())
    return "\n\n".join(part for part in parts if part)


def _document(found: Document, text: str, offset: int, max_chars: int) -> DocumentText:
    summary = found.summary
    latest = found.versions[0] if found.versions else None
    shown = text[offset : offset + max_chars]
    end = offset + len(shown)
    return DocumentText(
        document_id=str(summary.document_id),
        title=found.title,
        source_uri=summary.source_key,
        collection=summary.collection,
        status=summary.status,
        latest_version=summary.version,
        indexed_version=summary.indexed_version,
        error_message=cut(latest.error_message, MESSAGE_CHARS) if latest and latest.error_message else None,
        text=shown,
        offset=offset,
        total_chars=len(text),
        truncated=end < len(text),
        next_offset=end if end < len(text) else None,
    )


# The server: the tools registered with their schemas, errors as one line.

Result = TypeVar("Result")


def _one_line_errors(call: Callable[[], Result]) -> Result:
    """An error the index raises on purpose, or the database's, as the tool's error result:
    one line, no traceback (the SDK turns a ToolError into an `isError` result)."""
    try:
        return call()
    except IngestError as exc:
        raise ToolError(str(exc)) from None
    except psycopg.Error as exc:
        raise ToolError(f"database error: {first_line(exc)}") from None


def build_server(index: Index, scope: Scope) -> MCPServer:
    tools = Tools(index, scope)
    server: MCPServer = OneLineErrorServer(
        "ingestion-pipeline",
        instructions="Search the user's indexed documents (search), read one (show_document), "
        "and see what is being indexed (status). Cite results by their source_uri.",
        log_level="WARNING",
    )

    def search(
        query: Query, mode: SearchMode = None, limit: Limit = DEFAULT_RESULTS, collections: Collections = None
    ) -> SearchResult:
        """Search the indexed documents: one result per document, best first, with the title,
        source_uri, heading path, page and a snippet of its best passage."""
        return _one_line_errors(lambda: tools.search(query, mode, limit, collections))

    def show_document(
        document: DocumentRef,
        collection: CollectionName = None,
        offset: Offset = 0,
        max_chars: MaxChars = DEFAULT_TEXT_CHARS,
    ) -> DocumentText:
        """Read one document's indexed text (a part at a time: `offset` and `max_chars`), with
        its title, source_uri, collection and indexing status."""
        return _one_line_errors(lambda: tools.show_document(document, collection, offset, max_chars))

    def status(collection: StatusCollection = None) -> StatusResult:
        """What is being indexed: the latest import batches with their job counts, and the
        documents that failed, with their errors."""
        return _one_line_errors(lambda: tools.status(collection))

    for tool in (search, show_document, status):
        server.add_tool(tool, annotations=READ_ONLY, structured_output=True)
    return server
