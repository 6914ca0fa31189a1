"""`ingest mcp` driven by the MCP Python SDK's own client, as agents' hosts drive it: over
stdio (the SDK spawns the command) and over streamable HTTP (`--port`), on documents indexed by
`ingest` into a database of the test's. The three tools answer from the index; bad arguments
are MCP errors carrying one line, never a traceback; the served collections and the reader
scope every tool; the server stops cleanly at the end of its input, on SIGINT and on SIGTERM."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from psycopg.rows import dict_row

from ingestion_pipeline.api import Index
from ingestion_pipeline.cli import build_parser
from ingestion_pipeline.db.rpc import IngestionRpc

INGEST = Path(sys.executable).parent / "ingest"
ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
DOCS = ROOT / "docs" / "mcp.md"
TOOLS = {"search", "show_document", "status"}

LIGHTHOUSE = """# Lighthouse keepers

Keepers trimmed the wick every four hours so that the lamp never smoked.

## Fog signals

In fog the keeper rang the bell every thirty seconds until dawn.
"""
OTTERS = "# River otters\n\nRiver otters hold paws while they sleep, so that they do not drift apart.\n"


@dataclass(frozen=True)
class Indexed:
    url: str
    folder: Path
    lighthouse_key: str  # in collection handbook, made public
    otters_key: str  # in collection default, private


def environment(url: str, home: Path) -> dict[str, str]:
    """What `ingest` gets: the database by URL, no vectors, the session's data home (no
    INGEST_* or DATABASE_URL of the caller's)."""
    clean = {k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")}
    return {**clean, "DATABASE_URL": url, "INGEST_EMBEDDER": "none", "XDG_DATA_HOME": str(home)}


def ingest(folder: Path, url: str, *args: str) -> None:
    done = subprocess.run(
        [str(INGEST), *args], cwd=folder, env=environment(url, folder), capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def indexed(pg_server, templates, tmp_path_factory) -> Iterator[Indexed]:
    """One database for the module, indexed by `ingest` once: the tools only read it."""
    name = f"ingest_mcp_{uuid.uuid4().hex[:10]}"
    url = pg_server.create_database(name, template=templates.head)
    folder = tmp_path_factory.mktemp("mcp-docs")
    (folder / "lighthouse.md").write_text(LIGHTHOUSE)
    (folder / "otters.md").write_text(OTTERS)
    shutil.copy(SAMPLES / "postgres-leases.md", folder)  # what docs/mcp.md's example searches
    ingest(folder, url, "enqueue", "lighthouse.md", "--collection", "handbook")
    ingest(folder, url, "enqueue", "otters.md", "postgres-leases.md")
    ingest(folder, url, "work", "--drain")
    ingest(folder, url, "collection", "add", "handbook", "--public")
    yield Indexed(url, folder, (folder / "lighthouse.md").as_uri(), (folder / "otters.md").as_uri())
    pg_server.drop_database(name)


# The clients: a session of the SDK over each transport, to a server started with `args`.

Session = Callable[[ClientSession], Awaitable[None]]


def over_stdio(indexed: Indexed, session: Session, *args: str) -> None:
    """The SDK spawns `ingest mcp ARGS` and speaks to it over its stdin and stdout; the URL
    comes by --database-url (the environment has none)."""
    env = environment(indexed.url, indexed.folder)
    del env["DATABASE_URL"]
    params = StdioServerParameters(
        command=str(INGEST), args=["mcp", "--database-url", indexed.url, *args], env=env, cwd=indexed.folder
    )

    async def run(errlog: TextIO) -> None:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await session(client)

    with tempfile.TemporaryFile("w+") as errlog:
        anyio.run(run, errlog)
        errlog.seek(0)
        assert errlog.read() == "ingest mcp: stopped\n"  # its errors went to the client, none to its log


@dataclass
class HttpServer:
    process: subprocess.Popen[str]
    url: str


@pytest.fixture
def http_server(indexed: Indexed) -> Iterator[Callable[..., HttpServer]]:
    """`ingest mcp --port 0 ARGS` (a free port): ready once it prints the address it listens
    on, which it does after binding; stopped by SIGTERM at the end if a test did not stop it."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> HttpServer:
        process = subprocess.Popen(
            [str(INGEST), "mcp", "--port", "0", *args],
            cwd=indexed.folder,
            env=environment(indexed.url, indexed.folder),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stderr is not None
        line = process.stderr.readline()  # "" when the server died first
        assert line.startswith("ingest mcp: serving http://127.0.0.1:"), line + process.stderr.read()
        return HttpServer(process, line.split()[-1])

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def over_http(server: HttpServer, session: Session) -> None:
    async def run() -> None:
        async with streamable_http_client(server.url) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await session(client)

    anyio.run(run)


# What a client sees.


def result(called: CallToolResult) -> dict[str, Any]:
    assert not called.is_error, called.content
    assert called.structured_content is not None
    # The text content is the same result as JSON, for clients that read only text.
    assert json.loads(called.content[0].text) == called.structured_content  # type: ignore[union-attr]
    return called.structured_content


def error_line(called: CallToolResult) -> str:
    """An MCP error result's message: isError, readable, no traceback."""
    assert called.is_error, called.structured_content
    text = called.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text and 'File "' not in text, text
    assert text.startswith("Error executing tool "), text  # the SDK's words, then ours
    assert "\n" not in text and "pydantic" not in text and "[type=" not in text, text  # one line, in words
    return text.split(": ", 1)[1]


async def lists_the_tools_and_answers_from_the_index(client: ClientSession, indexed: Indexed) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.output_schema is not None
    assert tools["search"].input_schema["properties"]["limit"]["maximum"] == 20

    found = result(await client.call_tool("search", {"query": "fog bell"}))
    assert [hit["source_uri"] for hit in found["results"]] == [indexed.lighthouse_key]
    hit = found["results"][0]
    assert hit["title"] == "Lighthouse keepers" and hit["collection"] == "handbook"
    assert hit["heading_path"] == "Lighthouse keepers › Fog signals" and hit["page"] == 1
    assert "bell" in hit["snippet"].casefold() and found["may_have_more"] is False

    both = result(await client.call_tool("search", {"query": "keepers otters", "limit": 1}))
    assert len(both["results"]) == 1 and both["may_have_more"] is True

    shown = result(await client.call_tool("show_document", {"document": hit["source_uri"], "collection": "handbook"}))
    assert shown["title"] == "Lighthouse keepers" and shown["indexed_version"] == 1 and shown["status"] == "indexed"
    assert shown["text"].startswith("# Lighthouse keepers\n\nKeepers trimmed the wick")
    assert "## Fog signals\n\nIn fog the keeper rang the bell" in shown["text"]
    assert shown["truncated"] is False and shown["next_offset"] is None

    # By id, a page at a time: the pages put together are the whole text.
    pages, offset = [], 0
    while offset is not None:
        page = result(
            await client.call_tool("show_document", {"document": hit["document_id"], "offset": offset, "max_chars": 40})
        )
        assert len(page["text"]) <= 40 and page["truncated"] is (page["next_offset"] is not None)
        pages.append(page["text"])
        offset = page["next_offset"]
    assert len(pages) > 2 and "".join(pages) == shown["text"]

    status = result(await client.call_tool("status", {}))
    [everything] = status["collections"]
    assert status["collections_not_shown"] == []
    assert everything["collection"] is None and everything["failures"] == []
    assert sum(batch["completed"] for batch in everything["batches"]) == 3


async def refuses_bad_arguments(client: ClientSession, indexed: Indexed) -> None:
    empty = error_line(await client.call_tool("search", {"query": ""}))
    assert empty == "query should have at least 1 character (got '')"
    assert "the search query is empty" in error_line(await client.call_tool("search", {"query": "   "}))
    zero = error_line(await client.call_tool("search", {"query": "fog", "limit": 0}))
    assert zero == "limit should be greater than or equal to 1 (got 0)"
    both = error_line(await client.call_tool("search", {"query": "", "limit": 21}))
    assert both == "query should have at least 1 character (got ''); limit should be less than or equal to 20 (got 21)"
    assert "limit" in error_line(await client.call_tool("search", {"query": "fog", "limit": "many"}))
    fuzzy = error_line(await client.call_tool("search", {"query": "fog", "mode": "fuzzy"}))
    assert fuzzy == "mode should be 'lexical', 'vector' or 'hybrid' (got 'fuzzy')"
    long = error_line(await client.call_tool("search", {"query": "fog " * 400}))
    assert long.startswith("query should have at most 1000 characters (got 'fog fog") and len(long) < 120
    assert error_line(await client.call_tool("search", {"query": "fog", "collections": [7]})) == (
        "collections[0] should be a valid string (got 7)"
    )
    assert "no collection 'handbok'" in error_line(
        await client.call_tool("search", {"query": "fog", "collections": ["handbok"]})
    )
    assert error_line(await client.call_tool("show_document", {})) == "document is required"
    assert error_line(await client.call_tool("show_document", {"document": "x", "offset": -1})) == (
        "offset should be greater than or equal to 0 (got -1)"
    )
    assert error_line(await client.call_tool("status", {"collection": ["a"]})) == (
        "collection should be a valid string (got ['a'])"
    )
    missing = error_line(await client.call_tool("show_document", {"document": (indexed.folder / "gone.md").as_uri()}))
    assert "no document" in missing
    assert "no document" in error_line(await client.call_tool("show_document", {"document": str(uuid.uuid4())}))
    assert "max_chars" in error_line(await client.call_tool("show_document", {"document": "x", "max_chars": 0}))
    assert "no collection 'handbok'" in error_line(await client.call_tool("status", {"collection": "handbok"}))
    unknown = await client.call_tool("tidy_up", {})
    assert unknown.is_error and unknown.content[0].text == "Unknown tool: tidy_up"  # type: ignore[union-attr]
    # the session survives its errors
    assert result(await client.call_tool("search", {"query": "otters"}))["results"]


def test_stdio_lists_the_tools_and_answers_from_the_index(indexed):
    async def session(client: ClientSession) -> None:
        await lists_the_tools_and_answers_from_the_index(client, indexed)
        await refuses_bad_arguments(client, indexed)

    over_stdio(indexed, session)


def test_http_lists_the_tools_and_answers_from_the_index(indexed, http_server):
    server = http_server()

    async def session(client: ClientSession) -> None:
        await lists_the_tools_and_answers_from_the_index(client, indexed)
        await refuses_bad_arguments(client, indexed)

    over_http(server, session)
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == 0
    assert server.process.stderr is not None and server.process.stderr.read() == "ingest mcp: stopped\n"


def test_served_collections_scope_every_tool(indexed):
    async def session(client: ClientSession) -> None:
        found = result(await client.call_tool("search", {"query": "keepers otters"}))
        assert found["collections"] == ["handbook"]
        assert [hit["source_uri"] for hit in found["results"]] == [indexed.lighthouse_key]
        refused = error_line(await client.call_tool("search", {"query": "otters", "collections": ["default"]}))
        assert refused == "this server does not serve collection(s) 'default'; it serves 'handbook'"
        # a key is looked up in the one collection served; another collection's document is not found
        assert result(await client.call_tool("show_document", {"document": indexed.lighthouse_key}))["text"]
        otters = error_line(await client.call_tool("show_document", {"document": indexed.otters_key}))
        assert otters.startswith("no document")
        [handbook] = result(await client.call_tool("status", {}))["collections"]
        assert handbook["collection"] == "handbook" and [b["jobs"] for b in handbook["batches"]] == [1]

    over_stdio(indexed, session, "--collection", "handbook")


def test_an_anonymous_reader_reads_the_public_collections_only(indexed, http_server):
    with Index.open(indexed.url) as index:
        otters_id = str(index.show(indexed.otters_key).document_id)
    server = http_server("--as-anon")

    async def session(client: ClientSession) -> None:
        found = result(await client.call_tool("search", {"query": "keepers otters"}))
        assert [hit["source_uri"] for hit in found["results"]] == [indexed.lighthouse_key]
        # a private collection named is refused as one that does not exist is, in the same words
        for name in ("default", "nosuch"):
            for tool, arguments in (
                ("search", {"query": "otters", "collections": [name]}),
                ("status", {"collection": name}),
            ):
                assert error_line(await client.call_tool(tool, arguments)) == f"no collection {name!r}"
        lighthouse = result(await client.call_tool("show_document", {"document": found["results"][0]["document_id"]}))
        assert "bell" in lighthouse["text"]
        # the private document: not found, by key or by id, in the words used for one that does not exist
        by_key = error_line(await client.call_tool("show_document", {"document": indexed.otters_key}))
        assert by_key == f"no document {indexed.otters_key!r} in collection 'default'"
        by_id = error_line(await client.call_tool("show_document", {"document": otters_id}))
        assert by_id == f"no document {otters_id!r}"
        [public] = result(await client.call_tool("status", {}))["collections"]
        assert public["collection"] == "handbook"

    over_http(server, session)


def test_a_reader_sees_no_trace_of_a_private_collections_failure(db_url, tmp_path):
    """Issue 58, defect 4: one batch rebuilds a public collection's document and a private one's,
    and the private one fails. To an anonymous reader, `status` shows the public collection's
    jobs in that batch and a status made of them alone (`completed`, not the batch's
    `completed_with_errors`), and nothing of the private document; the owner sees the batch."""
    (tmp_path / "lighthouse.md").write_text(LIGHTHOUSE)
    (tmp_path / "ledger.pdf").write_bytes(b"%PDF-1.4 not really")
    with Index.open(db_url) as index:
        index.enqueue(tmp_path / "lighthouse.md", collection="handbook")
        index.enqueue(tmp_path / "ledger.pdf", collection="secret")
        index.work(drain=True, parse_processes=0)
        with psycopg.connect(db_url, row_factory=dict_row) as conn:
            rpc = IngestionRpc(conn)
            rpc.add_collection("handbook", public=True)
            batch_id = rpc.create_batch("nightly rebuild").batch_id
            for path, collection in (("lighthouse.md", "handbook"), ("ledger.pdf", "secret")):
                document_id = index.show(tmp_path / path, collection=collection).document_id
                assert rpc.enqueue(document_id, batch_id=batch_id, kind="reindex").ok
        index.work(drain=True, parse_processes=0)
        [owners] = index.status(batch=batch_id).batches
        assert (owners.status, owners.completed, owners.failed) == ("completed_with_errors", 1, 1)

    async def session(client: ClientSession) -> None:
        status = result(await client.call_tool("status", {}))
        [public] = status["collections"]
        assert public["collection"] == "handbook" and public["failures"] == []
        nightly = next(batch for batch in public["batches"] if batch["name"] == "nightly rebuild")
        assert (nightly["status"], nightly["jobs"], nightly["completed"], nightly["failed"]) == ("completed", 1, 1, 0)
        assert all(batch["status"] == "completed" for batch in public["batches"])
        assert "secret" not in json.dumps(status) and "ledger" not in json.dumps(status)
        assert result(await client.call_tool("status", {"collection": "handbook"})) == status

    over_stdio(Indexed(db_url, tmp_path, (tmp_path / "lighthouse.md").as_uri(), ""), session, "--as-anon")


def stdio_server(indexed: Indexed) -> subprocess.Popen[bytes]:
    """`ingest mcp` on pipes, once it has answered the handshake's first request."""
    process = subprocess.Popen(
        [str(INGEST), "mcp"],
        cwd=indexed.folder,
        env=environment(indexed.url, indexed.folder),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
    }
    process.stdin.write(json.dumps(hello).encode() + b"\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "ingestion-pipeline", answer
    return process


@pytest.mark.parametrize("stop", ["eof", "SIGINT", "SIGTERM"])
def test_the_stdio_server_stops_cleanly(indexed, stop):
    process = stdio_server(indexed)
    assert process.stdin is not None and process.stderr is not None
    if stop == "eof":
        process.stdin.close()
    else:
        process.send_signal(getattr(signal, stop))  # stdin stays open: the client did not go
    try:
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    assert process.stderr.read().decode() == "ingest mcp: stopped\n"


def test_a_port_in_use_or_an_unknown_collection_is_one_line(indexed):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for args, words in (
            (["--port", str(port)], f"cannot listen on 127.0.0.1:{port}"),
            (["--collection", "handbok"], "no collection 'handbok'"),
        ):
            done = subprocess.run(
                [str(INGEST), "mcp", *args],
                cwd=indexed.folder,
                env=environment(indexed.url, indexed.folder),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 1 and done.stdout == ""
            assert done.stderr.startswith(f"ingest: error: {words}") and len(done.stderr.splitlines()) == 1


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)


def test_every_block_of_the_page_is_run_here():
    """The blocks below are the page's every block: a new one needs its run here. The one not
    run installs the package."""
    fenced = re.findall(r"```(\w*)\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    assert [language for language, _ in fenced] == ["bash", "bash", "json", "python", "python"]
    assert fenced[0][1].startswith("pip install")


def run_python_block(indexed: Indexed, number: int) -> str:
    """One of docs/mcp.md's scripts by itself, as its reader runs it: `ingest` on PATH, the
    database in the environment, in a folder of the samples."""
    env = environment(indexed.url, indexed.folder)
    env["PATH"] = f"{INGEST.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, "-c", blocks("python")[number]],
        cwd=indexed.folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_docs_stdio_example_runs(indexed):
    output = run_python_block(indexed, 0)
    lines = output.splitlines()
    assert lines[0] == "['search', 'show_document', 'status']"
    assert lines[1].endswith(
        f"Leases and fencing in a PostgreSQL job queue  ({indexed.folder.as_uri()}/postgres-leases.md)"
    )
    assert "# Leases and fencing in a PostgreSQL job queue\n\nA worker claims a job" in output
    assert lines[-1] == "True Error executing tool search: limit should be greater than or equal to 1 (got 0)"


def test_the_docs_http_example_runs_by_itself(indexed):
    assert run_python_block(indexed, 1).splitlines() == [
        "Leases and fencing in a PostgreSQL job queue",
        "Error executing tool search: query should have at least 1 character (got '')",
    ]


def test_the_docs_commands_serve_and_stop(indexed):
    """`ingest mcp` as the page runs it: over stdio until its client closes stdin; over HTTP
    (on a free port here, not 8765, which another program may hold) until SIGTERM."""
    [_, commands] = blocks("bash")
    lines = [line.split("#")[0].split() for line in commands.splitlines() if line.strip()]
    assert [line[:2] for line in lines] == [["ingest", "mcp"]] * 3
    for line in lines:
        http = "--port" in line
        args = [("0" if http and word == "8765" else word) for word in line[1:]]
        process = subprocess.Popen(
            [str(INGEST), *args],
            cwd=indexed.folder,
            env=environment(indexed.url, indexed.folder),
            stdin=subprocess.DEVNULL,  # a stdio client that leaves at once
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        try:
            if http:
                assert process.stderr.readline().startswith("ingest mcp: serving http://127.0.0.1:")
                process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        finally:
            process.kill()
        assert process.stderr.read() == "ingest mcp: stopped\n", line


def test_the_docs_client_configuration_starts_a_server_that_answers(indexed):
    """The host's configuration as a host runs it, with this checkout's `ingest` for the
    placeholder path and the test database for the one named."""
    [config] = [json.loads(block) for block in blocks("json")]
    server = config["mcpServers"]["documents"]
    assert Path(server["command"]).name == "ingest" and set(server["env"]) == {"DATABASE_URL"}
    args = build_parser().parse_args(server["args"])
    assert args.command == "mcp" and args.collections == ["handbook"] and args.port is None
    env = {**environment(indexed.url, indexed.folder), **server["env"], "DATABASE_URL": indexed.url}
    params = StdioServerParameters(command=str(INGEST), args=server["args"], env=env, cwd=indexed.folder)

    async def run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            found = result(await client.call_tool("search", {"query": "fog bell"}))
            assert [hit["collection"] for hit in found["results"]] == ["handbook"]

    anyio.run(run)
