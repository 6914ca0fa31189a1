"""CSV and TSV (recognised by their suffix): one page, one section, the rows as Markdown
table text under the first row as the header, so a cell is found with its column's name.
A .csv's delimiter (comma, semicolon, tab or pipe) is sniffed from its first lines."""

from __future__ import annotations

import csv
import io

from .document import DraftSection, assemble
from .model import ParsedDocument
from .tables import markdown_table

CSV = "text/csv"
TSV = "text/tab-separated-values"
DELIMITED_SUFFIXES = {".csv": CSV, ".tsv": TSV, ".tab": TSV}
_SNIFF_CHARS = 64 * 1024
_CSV_DELIMITERS = ",;\t|"


def parse_delimited(text: str, mime_type: str) -> ParsedDocument:
    delimiter = "\t" if mime_type == TSV else _sniff_delimiter(text)
    csv.field_size_limit(len(text) + 1)  # one huge quoted field is data, not an error
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    table = markdown_table(rows)
    return assemble(mime_type, [table], [DraftSection(None, 1, 0, table)], title=None, title_from_first_line=False)


def _sniff_delimiter(text: str) -> str:
    try:
        return csv.Sniffer().sniff(text[:_SNIFF_CHARS], delimiters=_CSV_DELIMITERS).delimiter
    except csv.Error:  # one column, or too irregular to tell: the standard's comma
        return ","
