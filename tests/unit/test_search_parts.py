"""The pure parts of search: splitting a web-search query into terms, heading paths, and
reciprocal rank fusion."""

from uuid import UUID

import pytest

from ingestion_pipeline.processing import Section, heading_paths
from ingestion_pipeline.search.fusion import reciprocal_rank_fusion
from ingestion_pipeline.search.model import Hit
from ingestion_pipeline.search.terms import split_terms


@pytest.mark.parametrize(
    "text, included, excluded",
    [
        ("password file for client connections", ["password", "file", "for", "client", "connections"], []),
        ('vacuum -full "dead rows"', ["vacuum", '"dead rows"'], ["full"]),
        ("wal or xlog", ["wal", "xlog"], []),  # every term is optional already
        ('"unclosed phrase', ['"unclosed phrase"'], []),
        ('-"x y" z', ["z"], ['"x y"']),
        ('-- "" vacuum vacuum', ["vacuum"], []),
    ],
)
def test_split_terms(text, included, excluded):
    terms = split_terms(text)
    assert (terms.included, terms.excluded) == (included, excluded)


def test_terms_join_as_one_or_query():
    terms = split_terms('a "b c" -d -e')
    assert (terms.any_included, terms.any_excluded) == ('a or "b c"', "d or e")


def section(ordinal, heading, level):
    return Section(ordinal=ordinal, heading=heading, level=level, page_ordinal=None, text="text")


def test_heading_paths_follow_the_outline():
    sections = [
        section(0, None, 1),
        section(1, "Backup", 1),
        section(2, "Dumps", 2),
        section(3, "Options", 3),
        section(4, "Archiving", 2),
        section(5, None, 1),
        section(6, "Restore", 1),
    ]
    assert heading_paths(sections) == {
        0: None,
        1: "Backup",
        2: "Backup › Dumps",
        3: "Backup › Dumps › Options",
        4: "Backup › Archiving",
        5: "Backup › Archiving",
        6: "Restore",
    }


def hit(n: int, snippet: str = "") -> Hit:
    return Hit(
        document_id=UUID(int=n),
        title=f"t{n}",
        source_name=f"d{n}",
        source_uri=f"file:///d{n}",
        heading=None,
        chunk_ordinal=0,
        score=0.0,
        snippet=snippet,
    )


def test_fusion_rewards_agreement_and_keeps_one_hit_per_document():
    lexical = [hit(1, "lexical"), hit(2), hit(3)]
    vector = [hit(3, "vector"), hit(2), hit(4)]
    fused = reciprocal_rank_fusion([lexical, vector])
    # 2 and 3 are in both lists; 3's ranks (3rd, 1st) sum higher than 2's (2nd, 2nd).
    assert [h.document_id.int for h in fused] == [3, 2, 1, 4]
    assert fused[0].snippet == "vector"  # shown as the list that ranked it best (1st there)
    assert fused[1].score == pytest.approx(2 / 62)
