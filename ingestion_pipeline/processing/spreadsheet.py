"""XLSX (openpyxl, read-only, cached values): each sheet a page and a section headed by
the sheet's name, its rows Markdown table text under the first row as the header, so a
cell is found with its column's name."""

from __future__ import annotations

from typing import IO

from openpyxl import load_workbook

from .document import DraftSection, assemble
from .model import ParsedDocument
from .packages import XLSX
from .tables import markdown_table


def parse_xlsx(stream: IO[bytes]) -> ParsedDocument:
    workbook = load_workbook(stream, read_only=True, data_only=True)
    try:
        pages: list[str] = []
        drafts: list[DraftSection] = []
        for index, sheet in enumerate(workbook.worksheets):
            table = markdown_table(sheet.iter_rows(values_only=True))
            pages.append(table)
            drafts.append(DraftSection(sheet.title, 1, index, table))
        title = (workbook.properties.title or "").strip() or None
    finally:
        workbook.close()
    return assemble(XLSX, pages, drafts, title=title, title_from_first_line=False)
