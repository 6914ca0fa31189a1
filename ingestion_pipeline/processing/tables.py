"""Tables as Markdown table text: the header row, a rule, then each row, so a cell's value is
found next to its column's name and a table reads as one in a snippet."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell_text(value: object) -> str:
    """A cell as one line: pipes escaped, line breaks as spaces, None as empty."""
    if value is None:
        return ""
    return " ".join(str(value).split()).replace("|", "\\|")


def markdown_table(rows: Iterable[Sequence[object]]) -> str:
    """The rows (the first is the header) as Markdown; empty rows are left out."""
    lines: list[str] = []
    width = 0
    for row in rows:
        cells = [cell_text(value) for value in row]
        while cells and not cells[-1]:
            cells.pop()
        if not any(cells):
            continue
        if not lines:
            width = len(cells)
            lines.append(_line(cells, width))
            lines.append(_line(["---"] * width, width))
            continue
        width = max(width, len(cells))
        lines.append(_line(cells, width))
    return "\n".join(lines)


def _line(cells: list[str], width: int) -> str:
    padded = cells + [""] * (width - len(cells))
    return "| " + " | ".join(padded) + " |"
