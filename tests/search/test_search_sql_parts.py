"""The search RPC's parts in SQL: a web-search query split into terms (search_query_terms),
and hybrid mode's fusion of the lexical and the vector lists' scores."""

from __future__ import annotations

import pytest

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import NoEmbedder, embedder_record
from ingestion_pipeline.search import search
from tests.vector.corpus import EMBEDDER, index_folder, write_corpus


def lexical_share(text: str) -> float:
    """Migration 20261205000300: half for a query of up to four terms, a fifth from five on
    (20261205000100 had half for every query)."""
    return 0.5 if len(set(text.split())) <= 4 else 0.2


@pytest.mark.parametrize(
    "text, included, excluded",
    [
        ("password file for client connections", ["password", "file", "for", "client", "connections"], []),
        ('vacuum -full "dead rows"', ["vacuum", '"dead rows"'], ["full"]),
        ("wal or xlog", ["wal", "xlog"], []),  # every term is optional already
        ('"unclosed phrase', ['"unclosed phrase"'], []),
        ('-"x y" z', ["z"], ['"x y"']),
        ('-- "" vacuum vacuum', ["vacuum"], []),
        ("Vacuum vacuum OR\tfull", ["Vacuum", "vacuum", "full"], []),
        ("", [], []),
        # options are text: `-` excludes a word of two or more characters that begins with a
        # letter, or a phrase, and only beside some other term (issue 46)
        ("--help-xoptions -X -m", ["help-xoptions", "X", "m"], []),
        ("python -m venv -X", ["python", "m", "venv", "X"], []),
        ("vacuum -x -full", ["vacuum", "x"], ["full"]),
        ("-vacuum", ["vacuum"], []),  # nothing but exclusions: searched as words
        ('-vacuum -"dead rows"', ["vacuum", '"dead rows"'], []),
    ],
)
def test_query_terms(conn, text, included, excluded):
    rows = conn.execute("select n, term, excluded from search_query_terms(%s)", (text,)).fetchall()
    assert [r["term"] for r in rows if not r["excluded"]] == included
    assert [r["term"] for r in rows if r["excluded"]] == excluded
    for flag in (False, True):
        assert [r["n"] for r in rows if r["excluded"] is flag] == list(
            range(1, 1 + sum(r["excluded"] is flag for r in rows))
        )


def test_hybrid_adds_the_lexical_score_over_its_best_and_the_cosine(db_url, tmp_path):
    index_folder(db_url, write_corpus(tmp_path / "corpus"))
    with connect(db_url) as conn:
        for text, share in (
            ("volcano ash", 0.5),
            ("otter river stream fur", 0.5),
            ("otter river stream fur whiskers", 0.2),
            ("lamp of the lighthouse and a kettle of tea", 0.2),  # 8 distinct terms
        ):
            assert lexical_share(text) == pytest.approx(share)
            depth = 5 * 4
            lexical, vector = (
                search(conn, text, mode=mode, limit=depth, embedder=EMBEDDER) for mode in ("lexical", "vector")
            )
            fused: dict = {}
            for hits, weight in ((lexical, share / lexical[0].score), (vector, 1 - share)):
                for hit in hits:
                    fused[hit.document_id] = fused.get(hit.document_id, 0.0) + weight * max(hit.score, 0.0)
            expected = sorted(fused, key=lambda doc: (-fused[doc], str(doc)))[:4]
            hybrid = search(conn, text, mode="hybrid", limit=4, embedder=EMBEDDER)
            assert [hit.document_id for hit in hybrid] == expected, text
            for hit in hybrid:
                assert hit.score == pytest.approx(fused[hit.document_id])
            # each shown by its passage with the best fused score: its words over the best
            # passage's of the hits, and its cosine (migration 20261206000900)
            assert [hit.chunk_ordinal for hit in hybrid] == best_passages(conn, text, share, hybrid)


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
