"""`ingest search`: lexical, vector or hybrid search over the committed index."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ingestion_pipeline.cli.common import add_database_url, positive_int, print_json, user_id
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION
from ingestion_pipeline.operations.lookup import shown_key
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.processing.headings import SEPARATOR
from ingestion_pipeline.search import MODES, Hit, Mode, Reader, search
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    parser = commands.add_parser(
        "search",
        help="search the committed index: one result per document, best first",
        description="Lexical mode ranks documents by how much of the query they cover (a missing word "
        "lowers a page, it does not drop it), title and headings above body text. Vector mode "
        "ranks by embedding similarity (INGEST_EMBEDDER's, the one the documents were indexed "
        "with); hybrid fuses both lists. The default is hybrid, or lexical with INGEST_EMBEDDER=none.",
    )
    parser.add_argument("query", help='web-search syntax: words, "phrases", -excluded')
    parser.add_argument(
        "--mode", choices=MODES, default=None, help="default: hybrid (lexical when INGEST_EMBEDDER=none)"
    )
    parser.add_argument("--limit", type=positive_int, default=10, help="results (default 10)")
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
    parser.set_defaults(handler=cmd_search)


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    reader = Reader(args.as_user) if args.as_user is not None or args.as_anon else None
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
    embedder = embedder_from_settings(settings) if mode != "lexical" else None
    with migrated_pool(settings) as pool, pool.connection() as conn:
        if reader is not None:  # the search does not tell an app's reader; the operator is told
            IngestionRpc(conn).require_collections(collections or [])
        hits = search(conn, text, mode=mode, limit=limit, embedder=embedder, collections=collections, reader=reader)
    if as_json:
        print_json([hit.as_json() for hit in hits])
        return
    if not hits:
        print("no matches")
    for hit in hits:
        heading = "".join(f"{SEPARATOR}{h}" for h in headings_below_title(hit))
        where = shown_key(hit.source_uri) or hit.source_name
        collection = f", collection {hit.collection}" if hit.collection != DEFAULT_COLLECTION else ""
        print(f"{hit.score:.3f}  {hit.title}{heading}  ({where}{collection})")
        print(f"       {' '.join(hit.snippet.split())}")


def headings_below_title(hit: Hit) -> list[str]:
    """The headings above the hit's best chunk, outermost first, without the leading ones that
    only repeat the document's title (a page whose first heading is its title prints
    `Title › Section`, not `Title › Title › Section`)."""
    headings = hit.heading_path.split(SEPARATOR) if hit.heading_path else [hit.heading] if hit.heading else []
    title = " ".join(hit.title.split()).casefold()
    while headings and " ".join(headings[0].split()).casefold() == title:
        headings = headings[1:]
    return headings
