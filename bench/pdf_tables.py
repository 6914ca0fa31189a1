"""Table rows (bench/pdf_quality.py): the HTML twin's table rows (pdf_metrics.read_truth: rows of
2 non-empty cells or more, each cell normalized), which of them the PDF prints, and whether a
reader's text holds a row.

A row is printed when some anchor reader (pdftotext, pdftotext -layout, pdfminer.six,
pypdfium2; never this project) has all its cells, each whole (its normalized words together,
padded with spaces), in any order, on one of its pages or on two pages in a row (a row broken
across a page break). Rows printed nowhere (a table only the HTML has, such as
shared-mime-info's "Attribute | Required | Value"; a cell whose words the PDF breaks across
the lines of a narrow cell, `pam_acces` / `s`) are not counted, for any reader: the
denominator is the rows the PDF prints, as for headings and paragraphs. A reader finds a row
when its cells are in order within 3x the row's length of the first (row_found), on its whole
text.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from pdf_metrics import Truth, padded


def row_found(cells: Sequence[str], text: str, tries: int = 200) -> bool:
    """The row's cells in order, all within 3x the row's length from the first cell."""
    window = 3 * sum(len(c) + 1 for c in cells)
    start = 0
    for _ in range(tries):
        first = text.find(f" {cells[0]} ", start)
        if first < 0:
            return False
        pos, ok = first + len(cells[0]) + 1, True
        for cell in cells[1:]:
            at = text.find(f" {cell} ", pos, first + window)
            if at < 0:
                ok = False
                break
            pos = at + len(cell) + 1
        if ok:
            return True
        start = first + 1
    return False


def _places(pages: Sequence[str]) -> list[str]:
    """One reader's pages normalized and padded, then each two pages in a row joined."""
    texts = [padded(page) for page in pages]
    return texts + [a + b[1:] for a, b in itertools.pairwise(texts)]


def mark_unprinted(truth: Truth, anchor_pages: Sequence[Sequence[str]]) -> None:
    """truth.unprinted: the indexes of the rows no anchor's page (or two pages in a row) holds
    all the cells of, each whole, in any order. `anchor_pages`: each anchor reader's pages."""
    places = [text for pages in anchor_pages for text in _places(pages)]
    truth.unprinted = set()
    for index, cells in enumerate(truth.rows):
        needles = [f" {cell} " for cell in cells]
        if not any(all(n in text for n in needles) for text in places):
            truth.unprinted.add(index)


def table_rows(truth: Truth, text: str) -> tuple[int, int]:
    """(rows found, rows the PDF prints) in `text`, normalized and padded."""
    printed = [cells for i, cells in enumerate(truth.rows) if i not in truth.unprinted]
    return sum(row_found(cells, text) for cells in printed), len(printed)


def per_document(documents, truths: dict[str, Truth], found: dict, readers: Sequence[str]) -> tuple[list, list]:
    """Headers and rows of the table of rows per document: the twin's rows, those not printed,
    then each reader's found / printed (`found`: (document, reader) -> table_rows' pair)."""
    rows = [
        [d.name, str(len(truths[d.name].rows)), str(len(truths[d.name].unprinted))]
        + [f"{found[d.name, r][0]}/{found[d.name, r][1]}" for r in readers]
        for d in documents
        if truths[d.name].rows
    ]
    return ["document", "twin rows", "not printed", *(f"rows: {r}" for r in readers)], rows
