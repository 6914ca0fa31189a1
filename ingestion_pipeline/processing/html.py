"""HTML: beautifulsoup4 on the stdlib parser (no lxml to install). Sections start at
h1-h6; scripts, styles, the <head> (except its <title>) and the site's chrome
(boilerplate.py: navigation, banners, footers) are not text, unless the chrome is all the
page has.

A definition term that is a link target (`<dt id=…>`: an API entry of a Sphinx manual, a
parameter of the PostgreSQL manual, a glossary term) starts a section too, one level below
the heading (or term) it is under: it names what the text after it defines, so search
weighs it as a heading (issue 46)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from bs4 import BeautifulSoup
from bs4.element import NavigableString, PageElement, PreformattedString, Tag

from .boilerplate import remove_chrome
from .document import DraftSection, assemble
from .model import ParsedDocument

_HIDDEN = ["head", "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object"]
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_BLOCKS = {
    "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "main", "nav",
    "ol", "p", "pre", "section", "summary", "table", "ul",
}  # fmt: skip
_LINES = {"li", "tr", "br", "caption", "option"}
_CELLS = {"td", "th"}
_SPACE = re.compile(r"\s+")


def parse_html(text: str, *, keep_chrome: bool = False) -> ParsedDocument:
    soup = BeautifulSoup(text, "html.parser")
    title = _title_text(soup)
    for tag in soup.find_all([*_HIDDEN, "title"]):
        tag.decompose()
    removed = 0 if keep_chrome else remove_chrome(soup)
    collector = _Collector()
    _walk(soup, collector)
    drafts = collector.sections()
    if removed and not any(draft.text.strip() for draft in drafts):
        return parse_html(text, keep_chrome=True)  # a page of links only: its links are its text
    page = "\n\n".join(draft.text for draft in drafts)
    title = title or next((d.heading for d in drafts if d.level == 1 and d.heading), None)
    return assemble("text/html", [page], drafts, title=title, title_from_first_line=False)


def fragment_text(markup: str) -> str:
    """Text of an HTML fragment (raw HTML inside Markdown), hidden elements dropped."""
    soup = BeautifulSoup(markup, "html.parser")
    for tag in soup.find_all(_HIDDEN):
        tag.decompose()
    return soup.get_text(" ")


def _title_text(soup: BeautifulSoup) -> str | None:
    # An <svg> may carry its own <title> (a tooltip), which is not the page's.
    tag = next((t for t in soup.find_all("title") if not t.find_parent("svg")), None)
    return tag.get_text(" ") if tag else None


def _walk(root: Tag, collector: _Collector) -> None:
    """Depth-first over the tree with an explicit stack: deeply nested pages must not hit
    Python's recursion limit."""
    stack: list[tuple[Tag, Iterator[PageElement]]] = [(root, iter(root.children))]
    while stack:
        parent, children = stack[-1]
        node = next(children, None)
        if node is None:
            stack.pop()
            collector.close(parent)
        elif isinstance(node, Tag):
            if node.name in _HEADINGS or _defines(node):
                collector.heading(node)
            else:
                collector.open(node)
                stack.append((node, iter(node.children)))
        elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString):
            collector.text(str(node))  # PreformattedString: comments, doctype, CDATA


def _defines(tag: Tag) -> bool:
    return tag.name == "dt" and bool(tag.get("id"))


class _Collector:
    """Receives the walk's events and cuts the text into sections at headings."""

    def __init__(self) -> None:
        self._drafts: list[DraftSection] = []
        self._heading: str | None = None
        self._level = 1
        self._outer = 0  # the level of the last h1-h6
        self._parts: list[str] = []
        self._pre = 0  # inside <pre>, whitespace is content

    def heading(self, tag: Tag) -> None:
        text = _SPACE.sub(" ", tag.get_text(" ")).strip()
        if not text:  # an empty <h2></h2> (a styling hook) does not start a section
            return
        self._flush()
        if tag.name == "dt":  # under the heading it is in, and the terms its list is in
            self._heading, self._level = text, min(6, self._outer + 1 + len(tag.find_parents("dd")))
        else:
            self._heading, self._level = text, int(tag.name[1])
            self._outer = self._level
        self._parts = [text, "\n\n"]

    def open(self, tag: Tag) -> None:
        if tag.name == "pre":
            self._pre += 1
        if tag.name in _CELLS and tag.find_previous_sibling(_CELLS):
            self._parts.append(" | ")
        if tag.name in _BLOCKS:
            self._parts.append("\n\n")

    def close(self, tag: Tag) -> None:
        if tag.name == "pre":
            self._pre -= 1
        # Lines end only at the close, so consecutive list items stay on adjacent lines.
        if tag.name in _BLOCKS:
            self._parts.append("\n\n")
        elif tag.name in _LINES:
            self._parts.append("\n")

    def text(self, text: str) -> None:
        self._parts.append(text if self._pre else _SPACE.sub(" ", text))

    def sections(self) -> list[DraftSection]:
        self._flush()
        return self._drafts

    def _flush(self) -> None:
        self._drafts.append(DraftSection(self._heading, self._level, 0, "".join(self._parts)))
