"""The README's tour as its tests read it: each `$ .venv/bin/ingest …` line of the tour's bash
blocks, with the lines shown under it (tests/integration/test_readme_tour.py compares them with
what the commands print; tests/search/test_passages.py the search examples, with their scores)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tour_examples(commands: Collection[str], text: str | None = None) -> list[tuple[list[str], list[str]]]:
    """(arguments, the non-blank lines the README shows) for each `ingest` command of the tour
    whose first word is in `commands`, in order."""
    text = (ROOT / "README.md").read_text() if text is None else text
    tour = text.split("## A five-minute tour", 1)[1].split("**Your own PostgreSQL.**", 1)[0]
    examples: list[tuple[list[str], list[str]]] = []
    for block in re.findall(r"```bash\n(.*?)```", tour, re.S):
        current: list[str] | None = None
        for line in block.splitlines():
            if line.startswith("$ "):
                args = shlex.split(line.removeprefix("$ .venv/bin/ingest "))
                current = [] if line.startswith("$ .venv/bin/ingest ") and args[0] in commands else None
                if current is not None:
                    examples.append((args, current))
            elif current is not None and line.strip():
                current.append(line)
    return examples
