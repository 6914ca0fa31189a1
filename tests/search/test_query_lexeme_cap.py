"""The query cap counts lexemes once identifiers are split (issue 58, defect 2; migration
…_query_lexeme_cap.sql). Before it, one dotted identifier of 4,078 characters was one term and
446 lexemes, admitted; a phrase of hundreds of words in quotes was one term too."""

from __future__ import annotations

import psycopg
import pytest

from ingestion_pipeline.db.connection import connect
from tests.search.tenants_corpus import VOCABULARY

SEARCH = "select * from search_documents(%s, null, 'lexical', 10)"
IDENTIFIER = ".".join(f"part{n}x" for n in range(446))  # one term, 446 distinct parts
PHRASE = '"' + " ".join(f"word{n}x" for n in range(100)) + '"'
REPEATED = '"' + " ".join(["table"] * 682) + '"'  # one term, one lexeme, 682 positions to match
PLAIN = " ".join(f"{word}{n}" for n in range(4) for word in VOCABULARY[:16])  # 64 distinct words


def refused(url: str, text: str) -> str | None:
    with connect(url) as conn:
        try:
            conn.execute(SEARCH, (text,)).fetchall()
        except psycopg.errors.InvalidParameterValue as exc:
            return exc.diag.message_primary
    return None


@pytest.mark.parametrize(
    "text", [IDENTIFIER, PHRASE, REPEATED], ids=["dotted identifier", "long phrase", "one word repeated"]
)
def test_a_query_of_more_than_64_lexemes_is_refused(lexeme_cap_schema, text):
    assert len(text) <= 4096
    message = refused(lexeme_cap_schema.url, text)
    if lexeme_cap_schema.hardened:
        assert message is not None and "words once its identifiers are split" in message
    else:
        assert message is None  # the bug: admitted, whatever it costs


def test_64_plain_words_are_still_admitted(lexeme_cap_schema):
    assert len(set(PLAIN.split())) == 64
    assert refused(lexeme_cap_schema.url, PLAIN) is None
    assert refused(lexeme_cap_schema.url, '"' + " ".join(["table"] * 60) + '" pg_am.amname') is None
    assert refused(lexeme_cap_schema.url, PLAIN + " extra") is not None  # 65 terms: the term cap
