"""Sections -> chunks of bounded size that overlap a little, cut where meaning breaks.

Every chunk is a slice of one section's text (so chunks never span sections and the
overlap is literally shared text). Cut points are chosen by strength: a paragraph break
beats a sentence end, which beats a plain space; a word is cut only when it alone is
longer than max_chars.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model import DEFAULT_CHUNKING, Chunk, ChunkingOptions, Section

if TYPE_CHECKING:
    from ingestion_pipeline.settings import Settings

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?…][\"'’”»)\]]*$")
# Break strengths (the gap after a word).
_INSIDE_WORD, _SPACE, _SENTENCE, _PARAGRAPH = 0, 1, 2, 3


@dataclass
class _Words:
    starts: list[int]
    ends: list[int]
    breaks: list[int]  # breaks[i]: strength of the cut after word i


def chunking_from_settings(settings: Settings) -> ChunkingOptions:
    """INGEST_CHUNK_CHARS and INGEST_CHUNK_OVERLAP_CHARS (validated by Settings)."""
    return ChunkingOptions(max_chars=settings.chunk_chars, overlap_chars=settings.chunk_overlap_chars)


def chunk_sections(sections: list[Section], options: ChunkingOptions = DEFAULT_CHUNKING) -> list[Chunk]:
    chunks: list[Chunk] = []
    for section in sections:
        for text in split_text(section.text, options):
            chunks.append(Chunk(len(chunks), section.ordinal, section.page_ordinal, text, len(text.split())))
    return chunks


def split_text(text: str, options: ChunkingOptions) -> list[str]:
    """Slices of `text`, each at most max_chars, consecutive ones sharing <= overlap_chars."""
    return [text[start:end] for start, end in chunk_spans(text, options)]


def chunk_spans(text: str, options: ChunkingOptions) -> list[tuple[int, int]]:
    """(start, end) offsets of the chunks in `text`."""
    words = _words(text, options.max_chars)
    count = len(words.starts)
    spans: list[tuple[int, int]] = []
    first = at_least = 0  # at_least: a chunk must reach past the previous one's end
    while first < count:
        last = _pick_last(words, first, at_least, options.max_chars)
        spans.append((words.starts[first], words.ends[last]))
        if last == count - 1:
            break
        first, at_least = _next_first(words, first, last, options), last + 1
    return spans


def _words(text: str, max_chars: int) -> _Words:
    words = _Words([], [], [])
    for match in _WORD.finditer(text):
        start, end = match.span()
        # A word longer than a chunk (a URL, base64) is the one thing we must cut.
        for piece in range(start, end, max_chars):
            words.starts.append(piece)
            words.ends.append(min(piece + max_chars, end))
            words.breaks.append(_INSIDE_WORD)
        words.breaks[-1] = _SPACE if not _SENTENCE_END.search(match.group()) else _SENTENCE
    for i in range(len(words.starts) - 1):
        gap = text[words.ends[i] : words.starts[i + 1]]
        if "\n\n" in gap:
            words.breaks[i] = _PARAGRAPH
        elif "\n" in gap and words.breaks[i] == _SPACE:
            words.breaks[i] = _SENTENCE  # a line break ends a list item or a title
    return words


def _pick_last(words: _Words, first: int, at_least: int, max_chars: int) -> int:
    """Index of the chunk's last word: as far as fits, unless a stronger cut lies in the
    second half of the chunk (never below half, so chunks do not get tiny)."""
    start = words.starts[first]
    fits = bisect_right(words.ends, start + max_chars) - 1
    if fits == len(words.ends) - 1:
        return fits
    best, best_strength = fits, words.breaks[fits]
    for i in range(fits - 1, at_least - 1, -1):
        if words.ends[i] - start < max_chars // 2:
            break
        if words.breaks[i] > best_strength:
            best, best_strength = i, words.breaks[i]
    return best


def _next_first(words: _Words, first: int, last: int, options: ChunkingOptions) -> int:
    """First word of the next chunk: the earliest word that keeps the overlap within
    overlap_chars, preferring one that starts a sentence; the word after `last` if none."""
    end = words.ends[last]
    lowest = max(first + 1, bisect_left(words.starts, end - options.overlap_chars))
    candidates = [
        i
        for i in range(lowest, last + 1)
        # Start on a whole word, and leave room to reach past the previous chunk's end.
        if words.breaks[i - 1] != _INSIDE_WORD and words.ends[last + 1] - words.starts[i] <= options.max_chars
    ]
    sentence_starts = [i for i in candidates if words.breaks[i - 1] >= _SENTENCE]
    return (sentence_starts or candidates or [last + 1])[0]
