"""The search RPC's parts in SQL: a web-search query split into terms (search_query_terms),
and hybrid mode's fusion of the lexical and the vector lists' scores."""

from __future__ import annotations

import math

import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import NoEmbedder, embedder_record
from ingestion_pipeline.search import search
from tests.vector.corpus import EMBEDDER, index_folder, topic_text, write_corpus


def base_share(text: str) -> float:
    """Migration 20261205000300: half for a query of up to four terms, a fifth from five on
    (20261205000100 had half for every query)."""
    return 0.5 if len(set(text.split())) <= 4 else 0.2


def word_confidence(passages: list[float]) -> float:
    """Migration 20261206001100: the best passage's lead over the next document's best, from 0
    (5% or less) to 1 (30% or more)."""
    ranked = [*sorted(passages, reverse=True), 0.0, 0.0]
    if ranked[0] <= 0:
        return 0.0
    return min(max((1 - ranked[1] / ranked[0] - 0.05) / 0.25, 0.0), 1.0)


@pytest.mark.parametrize(
    "passages, confidence",
    [
        ([], 0.0),
        ([0.0], 0.0),
        ([3.0], 1.0),
        ([3.0, 3.0], 0.0),
        ([4.0, 3.0], 0.8),
        ([10.0, 9.5, 1.0], 0.0),
        ([10.0, 8.5], 0.4),
        ([10.0, 2.0, 9.0], 0.2),
    ],
)
def test_word_confidence(conn, passages, confidence):
    got = conn.execute("select search_word_confidence(%s::float8[])", (passages,)).fetchone()
    assert next(iter(got.values())) == pytest.approx(confidence) == pytest.approx(word_confidence(passages))


def chunk_terms(conn, text: str, document_id, ordinal: int) -> list[tuple[float, int]]:
    """A chunk's query words as (IDF over chunks, term frequency), worked out in Python from its
    search vector and the term counts: a word's title counted twice once, its headings twice
    each."""
    total = conn.execute("select sum(chunks)::float8 as n from search_term_counts where lexeme = ''").fetchone()["n"]
    terms = []
    words = conn.execute("select distinct lexeme from search_query_lexemes(%s) where kind = 'word'", (text,))
    for lexeme in [row["lexeme"] for row in words.fetchall()]:
        found = conn.execute("select sum(chunks)::float8 as n from search_term_counts where lexeme = %s", (lexeme,))
        chunks = found.fetchone()["n"] or 0.0
        row = conn.execute(
            """select u.weights::text[] as weights from documents d
                 join document_chunks c on c.document_id = d.id and c.index_generation_id = d.index_generation_id
                cross join unnest(c.content_tsv) u
                where d.id = %s and c.ordinal = %s and u.lexeme = %s""",
            (document_id, ordinal, lexeme),
        ).fetchone()
        if chunks == 0 or row is None:
            continue
        weights = row["weights"]
        tf = 2 * min(weights.count("A"), 1) + weights.count("B") + len(weights) - weights.count("A")
        terms.append((math.log(1 + (total - chunks + 0.5) / (chunks + 0.5)), tf))
    return terms


def bm25(terms: list[tuple[float, int]], k1: float) -> float:
    """BM25 over chunks of `chunk_terms`, no length norm (chunks are of a size)."""
    return sum(idf * tf * (k1 + 1) / (tf + k1) for idf, tf in terms)


def test_each_lexical_hit_carries_its_best_passages_score(db_url, tmp_path):
    index_folder(db_url, write_corpus(tmp_path / "corpus"))
    with connect(db_url) as conn:
        for text in ("otter river stream fur whiskers", "lamp of the lighthouse", "volcano ash"):
            hits = conn.execute("select * from search_lexical_ranked(%s, null, 50)", (text,)).fetchall()
            assert hits
            documents = [h["document_id"] for h in hits]
            chunks = conn.execute(
                "select * from search_chunk_scores(%s, null, null, null, %s::uuid[])", (text, documents)
            ).fetchall()
            for hit in hits:  # ranked by the best passage at BM25's k1 1.2 (passages: 0.6)
                mine = [c for c in chunks if c["document_id"] == hit["document_id"]]
                best = max(bm25(chunk_terms(conn, text, hit["document_id"], c["ordinal"]), 1.2) for c in mine)
                assert best > 0 and hit["passage"] == pytest.approx(best), text
            plain = conn.execute("select * from search_lexical_hits(%s, null, 50)", (text,)).fetchall()
            assert plain == [{k: v for k, v in h.items() if k != "passage"} for h in hits]
            # Hybrid ranking and passages read the same list without its snippets (20261207000300).
            bare = conn.execute("select * from search_lexical_ranking(%s, null, 50, false)", (text,)).fetchall()
            assert bare == [{**h, "snippet": None} for h in hits]
            assert all(h["snippet"] for h in hits)


def test_a_passages_words_saturate_at_k1_0_6(db_url, tmp_path):
    """Migration 20261207000300: a chunk's BM25 saturates its words at k1 0.6, not 1.2: a
    passage holding each of the question's words outranks one repeating one of them (document
    ranking keeps 1.2: the test above)."""
    index_folder(db_url, write_corpus(tmp_path / "corpus"))
    with connect(db_url) as conn:
        text = "otter river stream kettle lamp"
        documents = [h["document_id"] for h in conn.execute("select * from search_lexical_hits(%s, null, 50)", (text,))]
        chunks = conn.execute(
            "select * from search_chunk_scores(%s, null, null, null, %s::uuid[])", (text, documents)
        ).fetchall()
        repeated = 0
        for chunk in chunks:
            terms = chunk_terms(conn, text, chunk["document_id"], chunk["ordinal"])
            assert chunk["lexical"] == pytest.approx(bm25(terms, 0.6)), chunk
            repeated += bm25(terms, 0.6) != pytest.approx(bm25(terms, 1.2))
        assert repeated > 0  # words that occur more than once: k1 decides their scores


def test_hybrid_adds_the_lexical_score_and_the_cosine_weighed_by_the_words_lead(db_url, tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    (corpus / "more-otters.txt").write_text(topic_text("otters.txt", seed=1))  # two lead "otter"
    index_folder(db_url, corpus)
    with connect(db_url) as conn:
        seen = set()
        for text in (
            "otter",  # one term, two documents close: four fifths all the same (20261207000300)
            "volcano ash",
            "otter river stream fur",
            "otter river stream fur whiskers",
            "lamp of the lighthouse and a kettle of tea",  # 8 distinct terms
        ):
            lexical = conn.execute("select * from search_lexical_ranked(%s, null, 50)", (text,)).fetchall()
            vector = search(conn, text, mode="vector", limit=50, embedder=EMBEDDER)
            confidence = word_confidence([h["passage"] for h in lexical])
            best_passage = min(lexical, key=lambda h: (-h["passage"], str(h["document_id"])))["document_id"]
            if vector and vector[0].document_id != best_passage:  # the vector list's lead: less
                lead = vector[0].score - (vector[1].score if len(vector) > 1 else 0.0)
                confidence *= max(0.0, 1 - lead / 0.2)
            seen.add(confidence > 0)
            base = base_share(text)
            share = 0.8 if len(text.split()) == 1 else base + (0.8 - base) * confidence
            assert len(text.split()) > 1 or confidence < 1  # else four fifths either way
            passage = confidence if base == 0.5 else 0.5 + 0.5 * confidence  # a look-up: the document's
            top = max(h["score"] for h in lexical)
            top_passage = max(h["passage"] for h in lexical)
            fused: dict = {}
            for h in lexical:
                fused[h["document_id"]] = share * (
                    (1 - passage) * h["score"] / top + passage * h["passage"] / top_passage
                )
            for hit in vector:
                fused[hit.document_id] = fused.get(hit.document_id, 0.0) + (1 - share) * max(hit.score, 0.0)
            expected = sorted(fused, key=lambda doc: (-fused[doc], str(doc)))[:4]
            hybrid = search(conn, text, mode="hybrid", limit=4, embedder=EMBEDDER)
            assert [hit.document_id for hit in hybrid] == expected, text
            for hit in hybrid:
                assert hit.score == pytest.approx(fused[hit.document_id])
            # each shown by its passage with the best fused score: its words over the best
            # passage's of the hits, and its cosine (migration 20261206000900), with the share
            # above (20261206001100)
            assert [hit.chunk_ordinal for hit in hybrid] == best_passages(conn, text, share, hybrid)
        assert seen == {False, True}  # both a query whose words lead and one whose do not


def best_passages(conn, text: str, share: float, hits: list) -> list[int]:
    """The ordinal of each hit's chunk with the best fused score, from the chunks' scores."""
    documents = [hit.document_id for hit in hits]
    [vector] = EMBEDDER.embed([text])
    words = {
        (r["document_id"], r["ordinal"]): r["lexical"]
        for r in conn.execute(
            "select * from search_chunk_scores(%s, null, null, null, %s::uuid[])", (text, documents)
        ).fetchall()
    }
    cosines = conn.execute(
        "select * from search_chunk_scores(null, null, %s::real[], %s, %s::uuid[])",
        (vector, embedder_record(EMBEDDER, with_version=False).name, documents),
    ).fetchall()
    top = max(words.values())
    best: dict = {}
    for row in cosines:
        key = (row["document_id"], row["ordinal"])
        fused = share * words.get(key, 0) / top + (1 - share) * row["cosine"]
        if row["document_id"] not in best or fused > best[row["document_id"]][0]:
            best[row["document_id"]] = (fused, row["ordinal"])
    return [best[hit.document_id][1] for hit in hits]


def test_hybrid_over_an_index_without_vectors_ranks_as_lexical(db_url, tmp_path):
    index_folder(db_url, write_corpus(tmp_path / "corpus"), embedder=NoEmbedder())
    with connect(db_url) as conn:
        for text in ("otter river stream", "volcano ash"):
            lexical = search(conn, text, mode="lexical", limit=4)
            hybrid = search(conn, text, mode="hybrid", limit=4, embedder=EMBEDDER)
            assert lexical and [h.document_id for h in hybrid] == [h.document_id for h in lexical]
            # and the default mode is hybrid where the query can be embedded, lexical where not
            assert search(conn, text, limit=4, embedder=EMBEDDER) == hybrid
            assert search(conn, text, limit=4) == lexical


@pytest.mark.parametrize(
    "text, question",
    [
        ("autovacuum naptime", False),
        ("to_tsvector setweight ts_rank cover", False),  # four terms: a look-up
        ("how do I render SQL expressions as strings", True),
        ("what is the difference between a and b", True),  # stop words count: they are terms
        ("vacuum vacuum vacuum vacuum vacuum", False),  # one term, repeated
        ("tea kettle -oolong -green -black -white", False),  # excluded terms do not count
        ('"steep the leaves" in a warm kettle', True),  # a phrase is one term
    ],
)
def test_a_question_has_five_terms_or_more(conn, text, question):
    """Migration 20261205000300: lexical search normalises a question's BM25 for length in
    full, and hybrid gives it four fifths to the vector score."""
    assert conn.execute("select search_query_is_question(%s) as q", (text,)).fetchone()["q"] is question
