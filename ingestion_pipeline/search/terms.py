"""Split a web-search query into the parts lexical search ranks by.

The syntax is PostgreSQL's websearch_to_tsquery: words, "quoted phrases", -excluded words
or phrases, and `or`. Each word or phrase is one *term*; search ranks a page by how many of
its terms the page covers (so a page missing one word still ranks) instead of requiring
every term in one chunk, as websearch_to_tsquery's AND would. Stemming and stop words are
left to PostgreSQL: a term that is only stop words ("how", "for") is dropped there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# An optional minus, then a quoted phrase (the closing quote may be missing) or a bare word.
_TOKEN = re.compile(r'(-?)(?:"([^"]*)"?|([^\s"]+))')


@dataclass(frozen=True)
class QueryTerms:
    included: list[str]  # each a word or a "phrase", as websearch_to_tsquery text
    excluded: list[str]

    @property
    def any_included(self) -> str:
        """websearch text matching a chunk with at least one included term."""
        return " or ".join(self.included)

    @property
    def any_excluded(self) -> str:
        return " or ".join(self.excluded)


def split_terms(text: str) -> QueryTerms:
    included: list[str] = []
    excluded: list[str] = []
    for minus, phrase, word in _TOKEN.findall(text):
        if word:
            term = word.strip("-")
        elif phrase.strip():
            term = f'"{phrase.strip()}"'
        else:
            term = ""
        if not term or term.lower() == "or":  # every term is optional already
            continue
        target = excluded if minus else included
        if term not in target:
            target.append(term)
    return QueryTerms(included, excluded)
