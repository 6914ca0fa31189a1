"""Token ids of SentencePiece-style BPE tokenizers (WordLlama's, Llama 2's vocabulary) one
word at a time, each word merged once per process and then looked up.

Such a tokenizer has no pre-tokenizer: its normalizer turns spaces into "▁" and puts one
before the text, and BPE merges the whole chunk as one "word", pair by pair, about a
thousand characters at a time, never found in the model's cache of words (4-5 ms of a
job's 23 chunks, most of embedding them). Cut into words, a chunk's ids are its words'
ids, in order, whenever no token of the vocabulary holds a "▁" after another character
(checked before use): no merge can then join the end of one word to the "▁" that starts
the next, so each word's merges are the ones it gets inside the whole text. A text that
holds an added token's spelling ("<s>", which the tokenizer matches in the raw text) is
left to the tokenizer. tests/embedding/test_static_embedder.py compares the two.

A word is a run of "▁" and the characters up to the next one. In a text with one space
between words and none around them, and no "▁" of its own (the parsers' chunks, all of
those of the benchmarks' corpora), each is one "▁" and a part of `text.split(" ")`: such a
text is cut by split, others by a regular expression (19 against 37 us a chunk, with the
lookups; bench/results/ingest_corpus.md, "Issue 60: the drain at 1,500 files, session 9").
"""

from __future__ import annotations

import json
import re
from itertools import chain
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SPACE = "\u2581"  # SentencePiece's visible space
# A word: its run of "▁" and the characters up to the next "▁"; or a run of "▁" alone.
_WORD = re.compile(f"{SPACE}*[^{SPACE}]+|{SPACE}+")
_NORMALIZER = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
    ],
}
# Distinct words kept per process (their ids, a few dozen bytes each); then it starts over.
MAX_WORDS = 200_000


class WordPieces:
    """A text's token ids from its words' (see the module's docstring)."""

    def __init__(self, tokenizer: Tokenizer, added: list[str]) -> None:
        self._bpe = tokenizer.model
        self._added = added
        # A word's ids by the word less the "▁" before it: "▁▁b" is "▁b", and "▁b" is "b".
        self._ids: dict[str, tuple[int, ...]] = {}

    def ids(self, text: str) -> list[int] | None:
        """The ids the tokenizer gives `text` (without special tokens), or None when the text
        holds an added token's spelling (ask the tokenizer)."""
        if any(token in text for token in self._added):
            return None
        if not text:  # the normalizer puts no "▁" before an empty text
            return []
        if SPACE in text or "  " in text or text[0] == " " or text[-1] == " ":
            keys = [word[1:] for word in _WORD.findall(SPACE + text.replace(" ", SPACE))]
        else:  # one space between words and none around them: its words are its parts
            keys = text.split(" ")
        known = self._ids
        try:  # every word seen before: most texts, once a process has embedded a few
            return list(chain.from_iterable(map(known.__getitem__, keys)))
        except KeyError:
            pass
        missing = set(keys).difference(known)
        if len(known) + len(missing) > MAX_WORDS:
            known.clear()
            missing = set(keys)
        for key in missing:
            known[key] = tuple(token.id for token in self._bpe.tokenize(SPACE + key))
        return list(chain.from_iterable(map(known.__getitem__, keys)))


def word_pieces(tokenizer: Tokenizer) -> WordPieces | None:
    """Word-at-a-time ids for `tokenizer`, or None when it is not of that kind."""
    from tokenizers.models import BPE

    normalizer = tokenizer.normalizer
    if tokenizer.pre_tokenizer is not None or normalizer is None:
        return None
    if json.loads(normalizer.__getstate__()) != _NORMALIZER:
        return None
    if not isinstance(tokenizer.model, BPE) or tokenizer.model.dropout:  # dropout: random merges
        return None
    if any(SPACE in token.lstrip(SPACE) for token in tokenizer.get_vocab(with_added_tokens=True)):
        return None
    return WordPieces(tokenizer, [added.content for added in tokenizer.get_added_tokens_decoder().values()])
