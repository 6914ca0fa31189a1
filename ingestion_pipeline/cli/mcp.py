"""`ingest mcp`: the index's MCP server for agents (docs/mcp.md), over stdio, or streamable
HTTP on 127.0.0.1 with `--port`. Its tools read only; they serve the collections named here
(default: every one) as the reader named here (`--as-user`, `--as-anon`, as `ingest search`).

The SDK (the `mcp` extra) is imported only when the command runs, so `ingest` works, and
`ingest --help` lists this command, without it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ingestion_pipeline.api import Index, Reader
from ingestion_pipeline.cli.common import add_database_url, non_negative_int, user_id
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.extras import install_hint
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands


def register(commands: Commands) -> None:
    parser = commands.add_parser(
        "mcp",
        help="serve the index to agents over the Model Context Protocol (read-only tools)",
        description="An MCP server with three read-only tools: search, show_document and status. "
        "Over stdio by default (an MCP client starts it as a command); with --port, streamable HTTP "
        "at http://127.0.0.1:PORT/mcp. It stops at the end of its input (stdio), SIGINT or SIGTERM. "
        "Needs the mcp extra (the MCP SDK; docs/integrations.md).",
    )
    parser.add_argument(
        "--port",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="serve streamable HTTP on 127.0.0.1:N instead of stdio (0: a free port, printed on stderr)",
    )
    parser.add_argument(
        "--collection",
        dest="collections",
        action="append",
        default=[],
        metavar="NAME",
        help="serve only this collection (repeat for several; default: every collection the reader may read)",
    )
    reader = parser.add_mutually_exclusive_group()
    reader.add_argument(
        "--as-user",
        type=user_id,
        metavar="USER_ID",
        help="read as this app user would (the uuid auth.uid() returns): its collections and the public ones",
    )
    reader.add_argument("--as-anon", action="store_true", help="read as an anonymous app reader: public collections")
    add_database_url(parser)
    parser.set_defaults(handler=cmd_mcp)


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    try:
        from ingestion_pipeline.integrations import mcp_server, mcp_transports
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("mcp", "uvicorn"):
            raise
        raise IngestError(f"ingest mcp needs {install_hint('mcp')}") from None
    reader = Reader(args.as_user) if args.as_user is not None or args.as_anon else None
    scope = mcp_server.Scope(collections=tuple(dict.fromkeys(args.collections)), reader=reader)
    with Index.open(settings=settings) as index:
        for name in scope.collections:  # a typo stops here, not at an agent's first call
            index.status(collection=name, limit=1)
        server = mcp_server.build_server(index, scope)
        if args.port is None:
            mcp_transports.serve_stdio(server)
        else:
            mcp_transports.serve_http(server, mcp_transports.listen(args.port))  # announces its address
    print("ingest mcp: stopped", file=sys.stderr)
    return 0
