"""Tables as Markdown table text: the header row, a rule, then each row, so a cell's value is
found next to its column's name and a table reads as one in a snippet.

A long table repeats its header (and rule) every REPEAT_HEADER_CHARS characters of rows:
chunks hold at most 1200 characters, so a chunk cut from the middle of a long table still
carries the column names its cells are searched with."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

REPEAT_HEADER_CHARS = 1000


def cell_text(value: object) -> str:
    """A cell as one line: pipes escaped, line breaks as spaces, None as empty."""
    if value is None:
        return ""
    return " ".join(str(value).split()).replace("|", "\\|")


def markdown_table(rows: Iterable[Sequence[object]]) -> str:
    """The rows (the first is the header) as Markdown; empty rows are left out."""
    lines: list[str] = []
    header: list[str] = []
    width = since_header = 0
    for row in rows:
        cells = [cell_text(value) for value in row]
        while cells and not cells[-1]:
            cells.pop()
        if not any(cells):
            continue
        if not lines:
            width = len(cells)
            header = [_line(cells, width), _line(["---"] * width, width)]
            lines.extend(header)
            continue
        if since_header >= REPEAT_HEADER_CHARS:
            lines.extend(header)
            since_header = 0
        width = max(width, len(cells))
        lines.append(_line(cells, width))
        since_header += len(lines[-1]) + 1
    return "\n".join(lines)


def _line(cells: list[str], width: int) -> str:
    padded = cells + [""] * (width - len(cells))
    return "| " + " | ".join(padded) + " |"
