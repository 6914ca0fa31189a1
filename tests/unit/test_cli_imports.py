"""`ingest` imports what the command it runs needs, no more (issue 60: `ingest search` answers
in 0.3 s): the parser lists every command without importing its module, and the search path
does without Dagster, the parsers, numpy (until a query is embedded), the connection pool and
the RPC client's other models. Each check runs in a fresh interpreter; none is timed
(bench/cli_latency.py measures)."""

from __future__ import annotations

import json
import subprocess
import sys

from ingestion_pipeline.cli import COMMANDS, build_parser

HEAVY = {"dagster", "pydantic", "numpy", "psycopg_pool", "psycopg", "tokenizers", "pytesseract", "pypdfium2"}


def modules_after(code: str) -> set[str]:
    """The modules loaded after `code` runs in a new interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


def tops(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_importing_the_command_imports_no_heavy_library() -> None:
    assert tops(modules_after("import ingestion_pipeline.cli")) & HEAVY == set()


def test_help_imports_no_heavy_library_and_search_help_no_command_but_its_own() -> None:
    """`ingest --help` imports none; `ingest search --help` imports the search package (its
    modes), so psycopg and pydantic, but neither Dagster nor the embedders' libraries."""
    code = "from ingestion_pipeline.cli import build_parser, command_of\n"
    for argv, allowed in ((["--help"], set()), (["search", "--help"], {"psycopg", "pydantic"})):
        loaded = modules_after(
            f"{code}try:\n    build_parser(command_of({argv!r})).parse_args({argv!r})\nexcept SystemExit:\n    pass"
        )
        assert (tops(loaded) & HEAVY) - allowed == set(), argv
        assert not {m for m in loaded if m.startswith("ingestion_pipeline.cli.")} - {
            "ingestion_pipeline.cli.common",
            "ingestion_pipeline.cli.search",
        }, argv


def test_the_search_path_imports_neither_dagster_nor_the_parsers_nor_the_pool() -> None:
    """What `cmd_search` imports before it opens a connection: the search, the embedders'
    factory and the database's readiness check."""
    loaded = modules_after(
        "import ingestion_pipeline.cli.search, ingestion_pipeline.search, ingestion_pipeline.db.ready\n"
        "from ingestion_pipeline.processing import embedder_from_settings"
    )
    assert tops(loaded) & {"dagster", "numpy", "psycopg_pool", "pytesseract", "pypdfium2", "tokenizers"} == set()
    assert "ingestion_pipeline.processing.parse" not in loaded
    assert "ingestion_pipeline.db.rpc.client" not in loaded  # the whole RPC client, all its models
    assert "ingestion_pipeline.db.models.batches" not in loaded


def test_the_command_list_is_what_the_modules_register() -> None:
    """COMMANDS, which `ingest --help` lists without importing the modules, names each command
    its module registers, in order, with the same help."""
    full = build_parser()
    listed = build_parser("")
    assert full.format_help() == listed.format_help()
    (commands,) = [action for action in full._actions if action.dest == "command"]
    registered = {choice.dest: choice.help for choice in commands._choices_actions}
    assert registered == {name: help_text for name, (_, help_text) in COMMANDS.items()}
    assert list(registered) == list(COMMANDS)


def test_a_chosen_command_gets_its_arguments() -> None:
    args = build_parser("search").parse_args(["search", "otters", "--mode", "lexical", "--limit", "3"])
    assert (args.command, args.query, args.mode, args.limit) == ("search", "otters", "lexical", 3)
    assert callable(args.handler)


def test_the_search_client_imports_no_heavy_library() -> None:
    """What `ingest search` runs before the resident search process answers it
    (cli/search_client.py: the key of the caller's settings, the opt-out): the standard library
    only. tests/integration/test_search_server.py checks a whole search it answered."""
    loaded = modules_after(
        "from ingestion_pipeline.cli.search_client import key, opted_out, runtime_folder\n"
        "key()\nopted_out(['search', 'otters'])"
    )
    assert tops(loaded) & (HEAVY | {"pydantic_core", "pydantic_settings", "psutil", "platformdirs"}) == set()
    assert "ingestion_pipeline.settings" not in loaded and "ingestion_pipeline.cli.search" not in loaded
