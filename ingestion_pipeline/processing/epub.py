"""EPUB: the chapters in reading order (the package's spine), each a page, its headings
sections as in any HTML page (html.py). The title is the package's dc:title.

A small reader over zipfile and defusedxml instead of ebooklib: ebooklib is AGPL-3.0, and
what is needed is three lookups (container -> package document -> spine).
"""

from __future__ import annotations

import posixpath
import zipfile
from typing import IO
from urllib.parse import unquote
from xml.etree.ElementTree import Element

from defusedxml import ElementTree

from .document import DraftSection, assemble
from .html import parse_html
from .model import ParsedDocument
from .packages import EPUB
from .text import decode_text

_NS = {
    "container": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_CHAPTER_TYPES = {"application/xhtml+xml", "text/html"}


def parse_epub(stream: IO[bytes]) -> ParsedDocument:
    with zipfile.ZipFile(stream) as archive:
        package_path = _package_path(archive)
        package = ElementTree.fromstring(archive.read(package_path))
        chapters = [_chapter_html(archive, path) for path in _spine(package, package_path)]
    pages: list[str] = []
    drafts: list[DraftSection] = []
    for html in chapters:
        chapter = parse_html(html)
        if not chapter.sections:
            continue
        index = len(pages)
        pages.append("\n\n".join(page.text for page in chapter.pages))
        drafts.extend(DraftSection(s.heading, s.level, index, s.text) for s in chapter.sections)
    title = package.findtext(".//dc:title", default="", namespaces=_NS).strip() or None
    first = next((draft.heading for draft in drafts if draft.heading and draft.level == 1), None)
    return assemble(EPUB, pages, drafts, title=title or first, title_from_first_line=False)


def _package_path(archive: zipfile.ZipFile) -> str:
    container = ElementTree.fromstring(archive.read("META-INF/container.xml"))
    rootfile = container.find(".//container:rootfile", _NS)
    path = rootfile.get("full-path") if rootfile is not None else None
    if not path:
        raise ValueError("META-INF/container.xml names no package document")
    return str(path)


def _spine(package: Element, package_path: str) -> list[str]:
    """The archive paths of the chapters, in reading order."""
    base = posixpath.dirname(package_path)
    manifest = {
        item.get("id"): item
        for item in package.iterfind("opf:manifest/opf:item", _NS)
        if item.get("media-type") in _CHAPTER_TYPES
    }
    paths: list[str] = []
    for ref in package.iterfind("opf:spine/opf:itemref", _NS):
        item = manifest.get(ref.get("idref"))
        href = item.get("href") if item is not None else None
        if href:
            paths.append(posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0]))))
    if not paths:
        raise ValueError("the package's spine lists no chapters")
    return paths


def _chapter_html(archive: zipfile.ZipFile, path: str) -> str:
    return decode_text(archive.read(path))
