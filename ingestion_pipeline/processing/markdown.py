"""Markdown: parsed to tokens with markdown-it-py (CommonMark + tables), never rendered.

Sections start at headings; text before the first heading is a section without one.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from .document import DraftSection, assemble, join_blocks
from .html import fragment_text
from .model import ParsedDocument

_PARSER = MarkdownIt("commonmark").enable("table")
# YAML front matter (Jekyll, Hugo, Obsidian); CommonMark would read it as a rule + heading.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_INLINE_TEXT = {"text", "code_inline"}
_INLINE_BREAKS = {"softbreak", "hardbreak"}


def parse_markdown(text: str) -> ParsedDocument:
    body, meta_title = _split_front_matter(text)
    drafts, headings = _sections(_PARSER.parse(body))
    page = "\n\n".join(draft.text for draft in drafts)
    title = meta_title or _title(headings)
    return assemble("text/markdown", [page], drafts, title=title)


def _split_front_matter(text: str) -> tuple[str, str | None]:
    match = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    if not match:
        return text, None
    title = _FRONT_TITLE.search(match.group(1))
    return text.lstrip("\ufeff")[match.end() :], title.group(1).strip("'\"") if title else None


def _title(headings: list[tuple[int, str]]) -> str | None:
    """First level-1 heading, else the first heading; None lets the first line decide."""
    top = next((text for level, text in headings if level == 1 and text), None)
    return top or next((text for _, text in headings if text), None)


def _sections(tokens: list[Token]) -> tuple[list[DraftSection], list[tuple[int, str]]]:
    drafts: list[DraftSection] = []
    headings: list[tuple[int, str]] = []
    heading: str | None = None
    level = 1
    blocks: list[tuple[str, bool]] = []  # (text, tight): tight blocks are list/table lines
    depth = 0  # inside a list or table: blocks are lines, not paragraphs
    row: list[str] = []
    for index, token in enumerate(tokens):
        kind = token.type
        if kind == "heading_open" and _inline(tokens[index + 1]).strip():
            drafts.append(DraftSection(heading, level, 0, join_blocks(blocks)))
            heading, level = _inline(tokens[index + 1]), int(token.tag[1])
            headings.append((level, heading))
            blocks = [(heading, False)]  # the heading line opens its section's text
        elif kind in ("bullet_list_open", "ordered_list_open", "table_open"):
            depth += 1
        elif kind in ("bullet_list_close", "ordered_list_close", "table_close"):
            depth -= 1
        elif kind == "inline" and tokens[index - 1].type in ("th_open", "td_open"):
            row.append(_inline(token))
        elif kind == "tr_close":
            blocks.append((" | ".join(row), True))
            row = []
        elif kind == "inline" and tokens[index - 1].type != "heading_open":
            blocks.append((_inline(token), depth > 0))
        elif kind in ("fence", "code_block"):
            blocks.append((token.content, False))  # code is text people search for
        elif kind == "html_block":
            blocks.append((fragment_text(token.content), False))
    drafts.append(DraftSection(heading, level, 0, join_blocks(blocks)))
    return drafts, headings


def _inline(token: Token) -> str:
    """Plain text of an inline token: markup dropped, image alt text and code kept."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in _INLINE_TEXT or child.type == "image":
            parts.append(child.content)
        elif child.type in _INLINE_BREAKS:
            parts.append("\n")
    return "".join(parts)
