"""normalize() skips each of its steps where a fast scan finds no work for it; it must give
the text its definition gives (every line stripped of its runs of whitespace made one space,
line breaks unified, control characters dropped, at most one blank line in a row)."""

from __future__ import annotations

import random
import re
import sys
import unicodedata

from ingestion_pipeline.processing.text import OTHER_SPACE, normalize


def _by_definition(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"\r\n?|[\x0b\x0c\x85\u2028\u2029]", "\n", text)
    text = re.sub(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ufeff]", "", text)
    lines = (line.strip() for line in re.sub(r"[^\S\n]+", " ", text).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def test_other_space_is_every_whitespace_but_space_and_line_feed() -> None:
    spaces = {chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()} - {" ", "\n"}
    assert {char for char in spaces if OTHER_SPACE.fullmatch(char)} == spaces
    assert OTHER_SPACE.search("a b\nc") is None


def test_normalize_is_its_definition() -> None:
    pieces = ["a", "é", "e\u0301", " ", " ", "  ", "\n", "\n", "\r", "\t", "\x0b", "\x0c", "\x85", "\u2028"]
    pieces += ["\u2029", "\xa0", "\u3000", "\u2009", "\x01", "\x1c", "\x7f", "\ufeff"]
    rng = random.Random(59)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert normalize(text) == _by_definition(text), repr(text)
    assert normalize(" Two  words\t here \n\n\n\n next\xa0para \r\n") == "Two words here\n\nnext para"
