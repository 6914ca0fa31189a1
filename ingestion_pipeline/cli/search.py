"""`ingest search`: lexical, vector or hybrid search over the committed index."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ingestion_pipeline.cli.common import add_database_url, positive_int, print_json, user_id
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations.lookup import shown_key
from ingestion_pipeline.processing.headings import SEPARATOR
from ingestion_pipeline.search.model import MODES, Hit, Mode, Passage

if TYPE_CHECKING:
    import psycopg

    from ingestion_pipeline.cli.common import Commands
    from ingestion_pipeline.processing import Embedder
    from ingestion_pipeline.search import Reader
    from ingestion_pipeline.settings import Settings

# What the search runs on (the embedder, the database, the search RPCs) is imported by
# `cmd_search`, after the arguments are read: `ingest search -h` needs none of it.


def register(commands: Commands) -> None:
    parser = commands.add_parser(
        "search",
        help="search the committed index: one result per document (or the best passages), best first",
        description="Lexical mode ranks documents by how much of the query they cover (a missing word "
        "lowers a page, it does not drop it), title and headings above body text. Vector mode "
        "ranks by embedding similarity (INGEST_EMBEDDER's, the one the documents were indexed "
        "with); hybrid fuses both lists. The default is hybrid, or lexical with INGEST_EMBEDDER=none. "
        "A result needs evidence: the query's words, or a passage near it in meaning; with none the "
        "search prints `no results`. --passages lists the best passages instead, several of one document "
        "when they are the best, each in full.",
    )
    parser.add_argument("query", help='web-search syntax: words, "phrases", -excluded')
    parser.add_argument(
        "--mode", choices=MODES, default=None, help="default: hybrid (lexical when INGEST_EMBEDDER=none)"
    )
    parser.add_argument("--limit", type=positive_int, default=10, help="results (default 10)")
    parser.add_argument(
        "--passages", action="store_true", help="the best passages, each in full, instead of one result per document"
    )
    parser.add_argument(
        "--window",
        type=int,
        choices=range(4),
        default=0,
        metavar="N",
        help="with --passages: also the N chunks on each side of each passage (0-3, default 0)",
    )
    parser.add_argument(
        "--collection",
        dest="collections",
        action="append",
        metavar="NAME",
        help="only this collection's documents (repeat for several; default: every collection the caller may read)",
    )
    reader = parser.add_mutually_exclusive_group()
    reader.add_argument(
        "--as-user",
        type=user_id,
        metavar="USER_ID",
        help="search as this app user would (the uuid auth.uid() returns): as role authenticated with its "
        "claims, so row-level security shows only its collections and the public ones",
    )
    reader.add_argument(
        "--as-anon", action="store_true", help="search as an anonymous app reader would: public collections only"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_url(parser)
    parser.add_argument(
        "--no-server",
        action="store_true",
        help="search in this process: neither ask the resident search process nor start one "
        "(INGEST_SEARCH_SERVER=off for every search)",
    )
    parser.set_defaults(handler=cmd_search)


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from ingestion_pipeline.search import Reader

    reader = Reader(args.as_user) if args.as_user is not None or args.as_anon else None
    if args.window and not args.passages:
        raise IngestError("--window N goes with --passages: it adds the chunks around each passage")
    if args.passages:
        print_passages(
            settings,
            args.query,
            mode=args.mode,
            limit=args.limit,
            window=args.window,
            as_json=args.json,
            collections=args.collections,
            reader=reader,
        )
        return 0
    print_search(
        settings,
        args.query,
        mode=args.mode,
        limit=args.limit,
        as_json=args.json,
        collections=args.collections,
        reader=reader,
    )
    return 0


@contextmanager
def searching(
    settings: Settings, mode: Mode | None, collections: list[str] | None, reader: Reader | None
) -> Iterator[tuple[psycopg.Connection[Any], Embedder | None]]:
    """A connection to search on and the query's embedder (none for lexical mode)."""
    from ingestion_pipeline.db.ready import migrated_connection
    from ingestion_pipeline.processing import embedder_from_settings

    embedder = embedder_from_settings(settings) if mode != "lexical" else None
    with migrated_connection(settings) as conn:
        if reader is not None:  # the search does not tell an app's reader; the operator is told
            from ingestion_pipeline.db.rpc import IngestionRpc

            IngestionRpc(conn).require_collections(collections or [])
        yield conn, embedder


def print_search(
    settings: Settings,
    text: str,
    *,
    mode: Mode | None = None,
    limit: int = 10,
    as_json: bool = False,
    collections: list[str] | None = None,
    reader: Reader | None = None,
) -> None:
    from ingestion_pipeline.search import search

    with searching(settings, mode, collections, reader) as (conn, embedder):
        hits = search(conn, text, mode=mode, limit=limit, embedder=embedder, collections=collections, reader=reader)
    if as_json:
        print_json([hit.as_json() for hit in hits])
        return
    if not hits:
        print(NO_RESULTS)
    for hit in hits:
        print(hit_line(hit))
        print(f"       {' '.join(hit.snippet.split())}")


def print_passages(
    settings: Settings,
    text: str,
    *,
    mode: Mode | None,
    limit: int,
    window: int,
    as_json: bool,
    collections: list[str] | None,
    reader: Reader | None,
) -> None:
    from ingestion_pipeline.search import search_passages

    with searching(settings, mode, collections, reader) as (conn, embedder):
        passages: list[Passage] = search_passages(
            conn, text, mode=mode, limit=limit, window=window, embedder=embedder, collections=collections, reader=reader
        )
    if as_json:
        print_json([passage.as_json() for passage in passages])
        return
    if not passages:
        print(NO_RESULTS)
    for passage in passages:
        print(hit_line(passage))
        shown = passage.context if window else passage.content
        for line in shown.strip().splitlines():
            print(f"       {line}" if line.strip() else "")
        print()


NO_RESULTS = "no results"


def hit_line(hit: Hit) -> str:
    """Score, title, the headings below it, and where it came from."""
    from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION  # its module builds the documents' models

    heading = "".join(f"{SEPARATOR}{h}" for h in headings_below_title(hit))
    where = shown_key(hit.source_uri) or hit.source_name
    collection = f", collection {hit.collection}" if hit.collection != DEFAULT_COLLECTION else ""
    return f"{hit.score:.3f}  {hit.title}{heading}  ({where}{collection})"


def headings_below_title(hit: Hit) -> list[str]:
    """The headings above the hit's best chunk, outermost first, without the leading ones that
    only repeat the document's title (a page whose first heading is its title prints
    `Title › Section`, not `Title › Title › Section`)."""
    headings = hit.heading_path.split(SEPARATOR) if hit.heading_path else [hit.heading] if hit.heading else []
    title = " ".join(hit.title.split()).casefold()
    while headings and " ".join(headings[0].split()).casefold() == title:
        headings = headings[1:]
    return headings
