"""The documentation counts the index's checks as the code has them (issue 61: the README
said nine where the asset showed ten): every "N checks" of the pages that speak of them,
the tables that list them, and `ingest health`'s example output name exactly the checks of
ingestion_pipeline/health, in their order."""

from __future__ import annotations

import re
from pathlib import Path

from ingestion_pipeline.health import DESCRIPTIONS, WARNINGS
from ingestion_pipeline.health.vectors import NAMES as VECTOR_CHECKS

ROOT = Path(__file__).resolve().parents[2]
# The pages that speak of the index's checks (configuration.md's and state-machine.md's
# "checks" are other things).
PAGES = ["README.md", "docs/cli.md", "docs/operations.md", "docs/orchestration.md"]
WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
COUNTED = re.compile(rf"\b({'|'.join(WORDS)}|\d+)\s+(?:(health|vector)\s+)?checks\b", re.IGNORECASE)


def text(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def number(word: str) -> int:
    return int(word) if word.isdigit() else WORDS.index(word.casefold())


def test_every_count_of_the_checks_is_the_codes():
    counts = [(page, match.group(0)) for page in PAGES for match in COUNTED.finditer(text(page))]
    assert len(counts) >= 6, counts  # README twice, cli.md, operations.md, orchestration.md
    for page, said in counts:
        word, kind = COUNTED.fullmatch(said).groups()  # type: ignore[union-attr]
        expected = len(VECTOR_CHECKS) if kind and kind.casefold() == "vector" else len(DESCRIPTIONS)
        assert number(word) == expected, f"{page}: {said!r}, but the code has {expected}"


def table_names(page: str, header: str) -> list[str]:
    """The first column's names (in backquotes) of the table under `header`."""
    lines = text(page).split(header, 1)[1].splitlines()[2:]
    rows = [line for line in lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]]
    return [re.match(r"\| `(\w+)`", row).group(1) for row in rows]  # type: ignore[union-attr]


def test_the_tables_of_the_checks_list_every_one_in_order():
    assert table_names("docs/orchestration.md", "| check | asserts |") == list(DESCRIPTIONS)
    assert table_names("docs/operations.md", "| failing check | what it means | what to do |") == list(DESCRIPTIONS)


def test_ingest_healths_example_output_has_every_check_in_order_and_its_warning():
    page = text("docs/operations.md")
    example = page.split("## `ingest health` and its checks", 1)[1].split("```\n", 2)[1]
    rows = [line.split()[:2] for line in example.splitlines()[3:] if line and not line.startswith(("needs", "warning"))]
    assert [name for name, _ in rows] == list(DESCRIPTIONS)
    assert {name for name, result in rows if result == "WARNING"} <= WARNINGS
    assert [line for line in example.splitlines() if line.startswith("warning: ")]
