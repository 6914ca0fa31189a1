"""The README's tour shows what its commands print (issue 61: the documentation's example
outputs match the code). Each `$ .venv/bin/ingest …` line of the tour's blocks is run in order
on a new database, from the checkout (the README's paths are relative to it), with the
default embedder; what the README shows under it must match what the command prints:

- a line `…` stands for any number of lines (none included);
- `…` inside a line for any text, and a hex prefix before it (`ecbca5b5-…`) for any id;
- a decimal number (a time, a rate) for any number; runs of spaces for any run of spaces, and a
  table's rule for one of any width.

`ingest search` examples are checked in tests/search/test_passages.py, with their scores."""

from __future__ import annotations

import re

import pytest

from ingestion_pipeline.cli import main as ingest
from tests.readme import ROOT, tour_examples

TOUR = ("db", "enqueue", "work", "status", "health")  # the tour's commands shown with output
NUMBER = re.compile(r"\d+\.\d+")
HEX_ELLIPSIS = re.compile(r"[0-9a-f][0-9a-f-]*…")


def line_pattern(shown: str) -> re.Pattern[str]:
    parts = []
    for token in shown.split():
        if set(token) == {"-"}:  # a table's rule: as wide as its column
            parts.append("-+")
            continue
        pieces = []
        for piece in re.split(r"(\d+\.\d+|[0-9a-f][0-9a-f-]*…|…)", token):
            if not piece:
                continue
            if NUMBER.fullmatch(piece):
                pieces.append(r"\d+(?:\.\d+)?")
            elif HEX_ELLIPSIS.fullmatch(piece):
                pieces.append(r"[0-9a-f][0-9a-f-]*…?")
            elif piece == "…":
                pieces.append(r".*?")
            else:
                pieces.append(re.escape(piece))
        parts.append("".join(pieces))
    return re.compile(r"\s+".join(parts))


def matches(shown: list[str], printed: list[str]) -> bool:
    if not shown:
        return not printed
    if shown[0].strip() == "…":
        return any(matches(shown[1:], printed[i:]) for i in range(len(printed) + 1))
    return (
        bool(printed) and bool(line_pattern(shown[0]).fullmatch(printed[0].strip())) and matches(shown[1:], printed[1:])
    )


@pytest.mark.parametrize(
    "shown, printed, expected",
    [
        (["a  1.5"], ["a 12.25"], True),
        (["batch ecbca5b5-… (x)"], ["batch 75d02821-e74f-4087 (x)"], True),
        (["… applied"], ["50 applied"], True),
        (["x", "…"], ["x", "y", "z"], True),
        (["x"], ["x", "y"], False),  # a line the README leaves out needs its `…`
        (["a 4"], ["a 5"], False),  # counts are not numbers of a run
        (["---  --"], ["-----  ----"], True),
    ],
)
def test_the_comparison(shown, printed, expected):
    assert matches(shown, printed) is expected


def test_the_readmes_tour_shows_what_its_commands_print(empty_db_url, capsys, monkeypatch):
    monkeypatch.delenv("INGEST_EMBEDDER")  # the default model, as users run it
    monkeypatch.chdir(ROOT)
    examples = tour_examples(TOUR)
    assert [args[0] for args, _ in examples] == list(TOUR)
    for args, shown in examples:
        capsys.readouterr()
        assert ingest([*args, "--database-url", empty_db_url]) == 0, args
        printed = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
        assert matches(shown, printed), (args, printed)
