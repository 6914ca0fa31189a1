"""The two BM25 baselines of bench/search_quality.py, in memory: each returns up to `depth`
page names per query.

  bm25s    BM25 (bm25s defaults, k1 1.5, b 0.75) over title + body text, English stop words,
           Snowball English stemmer (PyStemmer; without it, unstemmed, and the label says so).
  tantivy  BM25 over two fields, title boosted x2 and body, `en_stem` tokenizer; the query is
           its words (punctuation dropped, lowercased), any of them may match.

They run in memory, so their latency is a floor, not a peer figure for a database; each
query's time includes tokenizing it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bookindex import Page

Searcher = Callable[[str], list[str]]
DEPTH = 10


def bm25s_searcher(pages: list[Page]) -> tuple[str, Searcher]:
    import bm25s

    try:
        import Stemmer

        stemmer, label = Stemmer.Stemmer("english"), "bm25s (BM25, stemmed, title + body)"
    except ImportError:
        stemmer, label = None, "bm25s (BM25, NOT stemmed: no PyStemmer, title + body)"
    options = {"stopwords": "en", "stemmer": stemmer, "show_progress": False}
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{p.title}\n{p.body}" for p in pages], **options), show_progress=False)

    def searcher(text: str) -> list[str]:
        tokens = bm25s.tokenize([text], return_ids=False, **options)
        if not tokens[0]:
            return []
        found, scores = retriever.retrieve(tokens, k=DEPTH, show_progress=False)
        return [pages[i].name for i, score in zip(found[0], scores[0], strict=True) if score > 0]

    return label, searcher


def tantivy_searcher(pages: list[Page]) -> tuple[str, Searcher]:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("page", stored=True)
    builder.add_text_field("title", tokenizer_name="en_stem")
    builder.add_text_field("body", tokenizer_name="en_stem")
    index = tantivy.Index(builder.build())
    writer = index.writer()
    for number, page in enumerate(pages):
        writer.add_document(tantivy.Document(page=number, title=page.title, body=page.body))
    writer.commit()
    index.reload()
    searcher_ = index.searcher()

    def searcher(text: str) -> list[str]:
        words = re.sub(r"[^\w\s]", " ", text).lower()  # no query syntax: words only, any may match
        if not words.strip():
            return []
        query = index.parse_query(words, ["title", "body"], field_boosts={"title": 2.0})
        hits = searcher_.search(query, DEPTH).hits
        return [pages[searcher_.doc(address)["page"][0]].name for _score, address in hits]

    return "tantivy (BM25F, title ×2 + body, en_stem)", searcher
