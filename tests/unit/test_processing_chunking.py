"""chunk_sections: bounded chunks, overlapping by shared text, cut at paragraph or
sentence ends when possible, never across sections; dense ordinals; deterministic."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from ingestion_pipeline.processing import Chunk, ChunkingOptions, Section, chunk_sections

WORDS = "pelican heron walrus fox river delta marsh reed tide dune moss fern lichen".split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
    return " ".join(words).capitalize() + rng.choice([".", ".", "!", "?"])


def prose(seed: int, paragraphs: int = 12) -> str:
    rng = random.Random(seed)
    return "\n\n".join(" ".join(sentence(rng) for _ in range(rng.randint(1, 8))) for _ in range(paragraphs))


def section(ordinal: int, text: str, page: int | None = 0) -> Section:
    return Section(ordinal=ordinal, heading=None, level=1, page_ordinal=page, text=text)


def by_section(chunks: list[Chunk]) -> dict[int | None, list[Chunk]]:
    groups: dict[int | None, list[Chunk]] = {}
    for chunk in chunks:
        groups.setdefault(chunk.section_ordinal, []).append(chunk)
    return groups


def shared_overlap(previous: str, following: str, limit: int) -> int:
    """Length of the longest suffix of `previous` that starts `following` (<= limit)."""
    return max((k for k in range(1, limit + 1) if previous.endswith(following[:k])), default=0)


OPTIONS = [ChunkingOptions(), ChunkingOptions(300, 60), ChunkingOptions(100, 0), ChunkingOptions(500, 250)]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: f"{o.max_chars}-{o.overlap_chars}")
@pytest.mark.parametrize("seed", range(5))
def test_bounds_overlap_and_coverage(seed, options):
    sections = [section(0, prose(seed)), section(1, prose(seed + 100), page=1)]
    chunks = chunk_sections(sections, options)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert 0 < len(chunk.text) <= options.max_chars
        assert chunk.text == chunk.text.strip()
        assert chunk.token_count == len(chunk.text.split())
        text = sections[chunk.section_ordinal].text
        assert chunk.text in text  # a slice of exactly one section
        assert chunk.page_ordinal == sections[chunk.section_ordinal].page_ordinal
    for ordinal, group in by_section(chunks).items():
        text = sections[ordinal].text
        assert group[0].text == text[: len(group[0].text)]
        assert text.endswith(group[-1].text)
        for previous, following in itertools.pairwise(group):
            overlap = shared_overlap(previous.text, following.text, options.overlap_chars)
            if options.overlap_chars:
                assert overlap > 0, "consecutive chunks share text"
            # Nothing is lost: the next chunk starts inside or right after the previous one.
            start = text.index(previous.text)
            assert text.index(following.text, start + 1) <= start + len(previous.text) + 2


def test_overlap_never_exceeds_the_option():
    options = ChunkingOptions(200, 40)
    text = prose(7)
    chunks = chunk_sections([section(0, text)], options)
    position = 0
    spans = []
    for chunk in chunks:
        start = text.index(chunk.text, position)
        spans.append((start, start + len(chunk.text)))
        position = start + 1
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end - start <= options.overlap_chars


def test_cuts_fall_at_sentence_or_paragraph_ends():
    chunks = chunk_sections([section(0, prose(3, paragraphs=30))], ChunkingOptions(400, 80))
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text[-1] in ".!?", chunk.text[-40:]


def test_paragraph_end_preferred_over_a_later_sentence_end():
    first = "Alpha sentence one is here. " * 10  # 280 chars
    second = "Beta sentence two is here. " * 10
    text = first.strip() + "\n\n" + second.strip()
    chunks = chunk_sections([section(0, text)], ChunkingOptions(400, 0))
    assert chunks[0].text == first.strip()
    assert chunks[1].text == second.strip()


def test_words_are_never_cut():
    rng = random.Random(5)
    text = " ".join(rng.choice(WORDS) * rng.randint(1, 3) for _ in range(800))  # no punctuation
    for chunk in chunk_sections([section(0, text)], ChunkingOptions(150, 30)):
        assert re.fullmatch(r"\S+( \S+)*", chunk.text)
        start = text.index(chunk.text)
        assert start == 0 or text[start - 1] == " "
        end = start + len(chunk.text)
        assert end == len(text) or text[end] == " "


def test_a_word_longer_than_a_chunk_is_cut_and_nothing_exceeds_max():
    blob = "x" * 450
    text = f"Before the blob. {blob} After the blob."
    chunks = chunk_sections([section(0, text)], ChunkingOptions(200, 50))
    assert all(len(c.text) <= 200 for c in chunks)
    assert "".join(c.text for c in chunks if set(c.text) == {"x"}) in blob
    assert chunks[0].text.startswith("Before the blob.")
    assert chunks[-1].text.endswith("After the blob.")
    assert sum(c.text.count("x") for c in chunks) >= 450


def test_chunks_never_span_sections():
    sections = [section(0, "Short first section."), section(1, "Short second section.", page=1)]
    chunks = chunk_sections(sections)
    assert [(c.text, c.section_ordinal, c.page_ordinal) for c in chunks] == [
        ("Short first section.", 0, 0),
        ("Short second section.", 1, 1),
    ]


def test_ordinals_are_dense_across_sections():
    sections = [section(i, prose(i, paragraphs=4)) for i in range(4)]
    chunks = chunk_sections(sections, ChunkingOptions(200, 20))
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert [c.section_ordinal for c in chunks] == sorted(c.section_ordinal for c in chunks)


def test_deterministic():
    sections = [section(0, prose(11)), section(1, prose(12))]
    assert chunk_sections(sections, ChunkingOptions(250, 50)) == chunk_sections(sections, ChunkingOptions(250, 50))


def test_empty_input():
    assert chunk_sections([]) == []


@pytest.mark.parametrize(
    ("max_chars", "overlap_chars"),
    [(99, 0), (100, 100), (200, 300), (200, -1)],
)
def test_options_are_validated(max_chars, overlap_chars):
    with pytest.raises(ValueError):
        ChunkingOptions(max_chars=max_chars, overlap_chars=overlap_chars)


def test_default_options():
    assert ChunkingOptions() == ChunkingOptions(max_chars=1200, overlap_chars=150)


def test_random_texts_and_options_always_progress_and_cover_everything():
    """Odd inputs (oversize words, huge overlaps, lone newlines) must neither loop nor
    drop text; checked on exact offsets."""
    from ingestion_pipeline.processing.chunking import chunk_spans

    rng = random.Random(42)
    tokens = ["a", "bb", "ccc.", "dddd!", "e\n", "f\n\n", "gg,"]
    for _ in range(400):
        max_chars = rng.randint(100, 400)
        options = ChunkingOptions(max_chars, rng.randint(0, max_chars - 1))
        parts = [
            "y" * rng.randint(1, 600) if rng.random() < 0.05 else rng.choice(tokens) for _ in range(rng.randint(0, 80))
        ]
        text = " ".join(parts).strip()
        spans = chunk_spans(text, options)
        covered: set[int] = set()
        for index, (start, end) in enumerate(spans):
            assert 0 < end - start <= max_chars
            if index:
                previous_start, previous_end = spans[index - 1]
                assert start > previous_start and end > previous_end
                assert previous_end - start <= options.overlap_chars
            covered.update(range(start, end))
        assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
