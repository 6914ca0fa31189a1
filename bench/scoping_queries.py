"""The queries of search_scoping.py: ~50 of varied selectivity in collection X, picked
from word counts of the generated text (so every server gets the same queries), with the
share of X's chunks each matches."""

from __future__ import annotations

import bisect
import itertools
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

import psycopg
from scoping_corpus import CorpusModel, chunk_words, make_document

# -- the queries ----------------------------------------------------------------------


@dataclass
class Query:
    kind: str
    text: str
    in_x: int = 0  # chunks of X that match any of its terms
    everywhere: int = 0  # chunks of every collection that do


# The words PostgreSQL's `english` configuration does not drop (its stop words are the
# same in every version; its stems are not: Snowball changed in PostgreSQL 16 and 17).
NOT_STOP_WORDS_SQL = """
select w from unnest(%s::text[]) as w where numnode(websearch_to_tsquery('english', w)) > 0
"""

COVERAGE_SQL = """
select count(*) filter (where d.collection = %(collection)s) as in_x, count(*) as everywhere
  from committed_document_chunks c
  join documents d on d.id = c.document_id
 where c.content_tsv @@ websearch_to_tsquery('english', %(any)s)
   and (%(excluded)s = '' or not c.content_tsv @@ websearch_to_tsquery('english', %(excluded)s))
"""


def terms(text: str) -> tuple[str, str]:
    """The query's included and excluded terms, each joined with `or` (as the RPC matches
    candidates: any included term, no excluded one)."""
    tokens = re.findall(r'(-?)("[^"]*"|\S+)', text)
    included = " or ".join(t for minus, t in tokens if not minus)
    excluded = " or ".join(t for minus, t in tokens if minus)
    return included, excluded


def word_counts(model: CorpusModel, x: int, share: int, seed: int) -> tuple[Counter[str], int]:
    """In how many of collection x's chunks each word is, from its generated documents (the
    build's own, regenerated): the same on every server, whatever its stemmer."""
    rng = random.Random(f"{seed}:{x}")
    counts: Counter[str] = Counter()
    chunks = number = 0
    while chunks < share:
        name, text = make_document(model, x, number, rng)
        for words in chunk_words(name, text):
            counts.update(words)
            chunks += 1
        number += 1
    return counts, chunks


def pick_queries(conn: psycopg.Connection, model: CorpusModel, x: str, share: int, seed: int) -> list[Query]:
    """~50 queries, the same for the same corpus on every server: words by the share of X's
    chunks they are in, counted on the generated text (words with an inflected form in the
    vocabulary left out, so that a word's count is its stem's); then the chunks their terms
    match, counted by the server."""
    rng = random.Random(f"{seed}:queries")
    index = int(x[1:]) - 1
    chain = model.chains[index]
    counts, chunks_x = word_counts(model, index, share, seed)
    words = sorted(w for w in model.vocabulary if len(w) >= 4 and w.isalpha() and w.isascii())
    candidates = {r[0] for r in conn.execute(NOT_STOP_WORDS_SQL, ([w for w in words if not inflected(w, words)],))}
    bands: dict[str, list[str]] = defaultdict(list)
    for word in sorted(candidates):
        if counts[word]:
            bands[band(counts[word], chunks_x)].append(word)

    def one(kind: str) -> str:
        return rng.choice(bands[kind])

    def phrase() -> str:
        while True:
            sentence = [w.lower() for w in chain.sentence(rng)]
            pairs = [p for p in itertools.pairwise(sentence) if all(w.isalpha() and len(w) >= 4 for w in p)]
            if pairs:
                return '"{} {}"'.format(*rng.choice(pairs))

    queries: list[Query] = []
    for kind, k in (("rare", 8), ("uncommon", 8), ("medium", 8), ("common", 6)):
        queries += [Query(f"one word, {kind}", w) for w in rng.sample(bands[kind], k=min(k, len(bands[kind])))]
    queries += [Query("two words", f"{one('medium')} {one('uncommon')}") for _ in range(5)]
    queries += [Query("three words", f"{one('common')} {one('medium')} {one('rare')}") for _ in range(4)]
    queries += [Query("question (6-9 words)", " ".join(chain.sentence(rng, most=rng.randint(6, 9)))) for _ in range(3)]
    queries += [Query("phrase", phrase()) for _ in range(3)]
    queries += [Query("exclusion", f"{one('common')} -{one('medium')}") for _ in range(2)]
    absent = [n for n in model.names.pool if n in candidates and not counts[n]]
    for name in absent[:200]:  # names the other collections have
        if len([q for q in queries if q.kind == "absent from X"]) == 3:
            break
        if coverage(conn, x, name)[1]:
            queries.append(Query("absent from X", name))
    for q in queries:
        q.in_x, q.everywhere = coverage(conn, x, q.text)
    return queries


def inflected(word: str, ordered: list[str]) -> bool:
    """Another word of the sorted vocabulary starts with all of this one but its last three
    letters (and at least three): "size", "sizes", "sizing"."""
    stem = word[: max(3, len(word) - 3)]
    at = bisect.bisect_left(ordered, stem)
    return sum(1 for w in ordered[at : at + 2] if w.startswith(stem)) > 1


def band(chunks: int, of: int) -> str:
    return "rare" if chunks <= 10 else "uncommon" if chunks < 0.02 * of else "medium" if chunks < 0.2 * of else "common"


def coverage(conn: psycopg.Connection, x: str, text: str) -> tuple[int, int]:
    """The chunks (in X, in every collection) that match any of the query's terms and none of
    its excluded ones."""
    included, excluded = terms(text)
    row = conn.execute(COVERAGE_SQL, {"collection": x, "any": included, "excluded": excluded}).fetchone()
    return row[0], row[1]
