"""Word spaces PDFium moves. It loses the displacement at the end of a TJ array that ends in an
empty string, which gropdf (groff's PDF writer) writes before every font change that follows a
space (`[(The) -250 ()] TJ /F36 10 Tf [(width)] TJ`): the word in the new font touches the one
before ("Thewidth"), and the text after it stands that space to the left until the next text
positioning puts it back, which opens a space inside a word there ("k eyword", "tok en").

Such a line is put right, the space moved back to where the font changed, where all of this
holds: the two characters at the font change touch exactly (the pen went on from the one
before); the first later place on the line where a text object in the same font starts apart
from the one before (a re-positioning) is a gap between two letters about a space wide, which
PDFium read as a space; and the two parts there make a word the document has elsewhere
("keyword"). A word set in another font without a space (`<latexonly>`, `‘$0’`) followed by a
real space at a re-positioning ("\\endlatexonly command") fails the last test.

Looking at every character's text object would cost a third of reading a page: only lines
whose text has two such parts a space apart are measured, and a document only on its first
pages with text and on the rest where these showed such a place (gropdf's on every page).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence

import pypdfium2.raw as pdfium_c

from .chars import Chars

_SAMPLED = 3  # pages with text looked at before a document showing no moved space is left alone
_TOUCH = 0.01  # of the type's size: characters this close touch (the pen went on)
_MOVED = (0.1, 0.6)  # of the size: the gap a lost word space opens at the re-positioning
_MIN_RUNS = 3  # PDFium's text runs on a line: fewer hold no font change and re-positioning
_RARE = 2  # a part of a word seen this often or less in the document: no word of its own
_OPENING, _CLOSING = "([{‘“", ")]},.;:!?"
_ALNUM = re.compile(r"[^\W_]+")
_ALNUM_END = re.compile(r"[^\W_]+$")
_SPACED = re.compile(r"([^\W_]+) (?=([^\W_]+))")  # two runs of letters or digits one space apart


class Shifts:
    """What a document's pages read so far showed: how many were looked at, whether one had a
    moved space, and the words of all of them (lower case) with how often each was seen."""

    def __init__(self) -> None:
        self.pages = 0
        self.seen = False
        self.words: Counter[str] = Counter()

    @property
    def looking(self) -> bool:
        return self.seen or self.pages < _SAMPLED


def moved_spaces(
    raw: pdfium_c.FPDF_TEXTPAGE, chars: Chars, parts: Sequence[tuple[int, str, int, float]], shifts: Shifts
) -> dict[int, tuple[str, str]]:
    """For each line (number, its text as PDFium reads it, first character's index, size) with
    a moved space: (number) -> (the text from the character before the font change to the one
    after the gap, the same with the space moved back). The words of `parts` are counted first,
    and only a line with two parts of a word apart (by its text) is measured."""
    if not shifts.looking or not parts:
        return {}
    shifts.pages += 1
    words = shifts.words
    words.update(_ALNUM.findall(" ".join(part for _n, part, _s, _z in parts).lower()))
    edits: dict[int, tuple[str, str]] = {}
    for number, part, start, size in parts:
        if not _joinable(part, words):
            continue
        if pdfium_c.FPDFText_CountRects(raw, start, len(part)) < _MIN_RUNS:
            continue
        for touch, gap in _pairs(chars, part, start, size):
            shifts.seen = True
            left = _ALNUM_END.search(part, touch, gap)
            right = _ALNUM.match(part, gap + 1)
            if left is not None and right is not None and _one_word(left.group(), right.group(), words):
                before = part[touch - 1 : gap + 2]
                edits[number] = (before, f"{before[0]} {before[1 : gap - touch + 1]}{before[gap - touch + 2 :]}")
                break
    return edits


def _pairs(chars: Chars, part: str, start: int, size: float) -> list[tuple[int, int]]:
    """(offset of the first character in the new font, offset of the space PDFium put in the
    gap) of each font change that touches followed by such a gap."""
    objects = chars.objects(start, len(part))
    solid = [offset for offset, char in enumerate(part) if not char.isspace()]
    pairs: list[tuple[int, int]] = []
    touch: int | None = None
    for a, b in itertools.pairwise(solid):
        if objects[a] == objects[b]:
            continue
        same_font = chars.font_name(start + a) == chars.font_name(start + b)
        gap = chars.origin(start + b)[0] - chars.advance_end(start + a)
        if b == a + 1:
            # The last such place since the text was last in place; not where punctuation
            # clings to a word (".c)", "‘expr"): no space was lost there.
            clings = part[a] in _OPENING or part[b] in _CLOSING
            if not same_font and abs(gap) <= _TOUCH * size and not clings:
                touch = b
            continue
        if touch is None or not same_font:
            continue
        # A re-positioning in the same font: the moved text is back in place from here on.
        letters = part[a].isalpha() and part[b].isalpha()
        if b == a + 2 and objects[a + 1] is None and letters and _MOVED[0] * size <= gap <= _MOVED[1] * size:
            pairs.append((touch, a + 1))
        touch = None
    return pairs


def _joinable(part: str, words: Counter[str]) -> bool:
    """Whether the line has two runs of letters a space apart, one of them rare, where the
    second and the end of the first make a word ("displaygtr off": "gtroff")."""
    for first, second in _SPACED.findall(part):
        first, second = first.lower(), second.lower()
        rare = words[first] <= _RARE or words[second] <= _RARE
        if rare and any(words[first[begin:] + second] for begin in range(len(first))):
            return True
    return False


def _one_word(first: str, second: str, words: Counter[str]) -> bool:
    """Whether two runs of letters or digits a space apart make one word of the document:
    the two together seen twice, or once where one of them is rare on its own ("k eyword")."""
    first, second = first.lower(), second.lower()
    whole = words[first + second]
    return whole >= _RARE or (whole >= 1 and min(words[first], words[second]) <= _RARE)
