"""Site chrome in HTML: navigation, banners and footers that repeat on every page of a site
and are not the page's content. Indexed, they put the same words ("Next", "Home", "Prev")
into thousands of chunks and turn every page into a hit for them.

Chrome is: `<nav>`; an element whose ARIA role is a navigation, banner, footer or search
landmark; a `<header>` or `<footer>` outside the page's `<article>`/`<main>` unless it
holds the page's `<h1>` (simple pages put their title there); and the navigation blocks of
generated manuals (DocBook's `navheader`/`navfooter`, breadcrumbs, skip links).

So is a list of links: a `<ul>`, `<ol>` or `<dl>` of three links or more whose text is
(almost) all link text, as a manual's table of contents is (Sphinx's toctree, DocBook's
`toc`). A chapter page lists every name of its sections there, and ranked above the page
that defines the name (issue 46); the page it links to holds the words.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from bs4.element import Tag

_ROLES = {"navigation", "banner", "contentinfo", "search"}
_CLASSES = re.compile(r"^(?:navheader|navfooter|breadcrumbs?|skip-?links?|site-?(?:header|footer|nav))$")
_CONTENT = ["article", "main"]
_LISTS = {"ul", "ol", "dl"}
_LINK_SHARE = 0.8  # of a list's text, in its links
_SPACE = re.compile(r"\s+")


def remove_chrome(soup: BeautifulSoup) -> int:
    """Remove the chrome from `soup`; how many elements were removed."""
    chrome = [tag for tag in soup.find_all(True) if _is_chrome(tag)]
    removed = 0
    for tag in chrome:
        if not tag.decomposed:  # not inside chrome removed before it
            tag.decompose()
            removed += 1
    return removed


def _is_chrome(tag: Tag) -> bool:
    if tag.name == "nav" or str(tag.get("role", "")).lower() in _ROLES:
        return True
    if tag.name in ("header", "footer"):
        return tag.find_parent(_CONTENT) is None and tag.find("h1") is None
    if tag.name in _LISTS:
        return _is_link_list(tag)
    classes = tag.get_attribute_list("class")
    return any(_CLASSES.match(str(name).lower()) for name in classes if name)


def _is_link_list(tag: Tag) -> bool:
    links = tag.find_all("a")
    if len(links) < 3:
        return False
    text = len(_SPACE.sub("", tag.get_text()))
    linked = sum(len(_SPACE.sub("", link.get_text())) for link in links)
    return text > 0 and linked >= _LINK_SHARE * text
