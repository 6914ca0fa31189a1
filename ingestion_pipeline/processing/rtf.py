"""RTF: striprtf turns the markup into plain text (paragraphs and table cells on their own
lines); then as plain text. RTF keeps headings only as font sizes, so there are no
sections but the one."""

from __future__ import annotations

from striprtf.striprtf import rtf_to_text

from .document import DraftSection, assemble
from .model import ParsedDocument

RTF = "application/rtf"


def parse_rtf(markup: str) -> ParsedDocument:
    text = str(rtf_to_text(markup, errors="replace"))  # type: ignore[no-untyped-call]
    return assemble(RTF, [text], [DraftSection(None, 1, 0, text)], title=None)
