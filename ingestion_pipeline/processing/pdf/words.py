"""Words PDFium runs together, separated by the gaps between their letters.

PDFium puts a space where text objects stand apart, and where a TJ array moves the pen by
about a space; Ghostscript's PDFs of groff output move it by less in justified lines
(`rofftype-setting`, `wascalled` with 3 points between the words' letters at 10 points), and
PDFium loses the space after an f-ligature ("roffand"). Measuring every character would
cost more than PDFium's own reading, so only the words that may be two are measured: long
words of letters, words with an f-ligature, punctuation glued to a word. A page where three
such words were two or more is measured letter by letter (respaced), and so is every page of
a document where most pages read so far were such pages: there short words run together
too ("italist"), and a space glyph the pen moved back over stands between two letters that
touch ("inv oke").
"""

from __future__ import annotations

import re

from .chars import Chars

_LONG_WORD = 9  # letters: a word this long may be two run together
# Words of letters only (identifiers, paths and numbers are long by nature); a word with an
# f-ligature in it; a word's end punctuation glued to the next word ("Historically,the").
# Each starts where a run of letters does (matches never start inside one, and the
# look-behind spares the search from trying every letter).
_WORD = re.compile(
    rf"(?<![^\W\d_])(?:[^\W\d_]{{{_LONG_WORD},}}|[^\W\d_]*f[fil][^\W\d_]+|[^\W\d_]{{2,}}[,;:.)][^\W\d_]{{2,}})"
)
# What a stretch of text without a space holds where it holds a _WORD of fewer than
# _LONG_WORD characters: an f-ligature, or punctuation glued to a letter. _WORD is looked for
# only in stretches this long or holding these: most are neither (a line's words split at
# its spaces cost less than looking for _WORD at every character of it).
_SHORT_HINT = re.compile(r"f[fil]|[,;:.)][^\W\d_]")
_SHORTEST_WORD = 3  # characters: the shortest _WORD ("ffi")
SPLITS_TO_MEASURE_ALL = 3  # words split on a page before every word of it is measured
_SPACE_GAP_OVER = 0.12
_SPACE_GAP = 0.2  # of the type's size: an ink gap this wide between two letters is a space
_TOKEN = re.compile(r"\S+")
_OWN_GAPS = 3  # gaps in a word (of four characters) that make its own usual gap
_NO_SPACE = 0.12  # of the size: a space between two letters closer than this is none


def separated(chars: Chars, part: str, start: int, size: float) -> str:
    """`part` (the text of characters `start`...) with a space wherever a word that may be two
    has a gap as wide as a space inside it; `part` itself where none."""
    out: list[str] = []
    at = 0
    for first, word in _candidates(part):
        split = _split_at_gaps(chars, word, start + first, size)
        # Inline code in a fixed-pitch font is left alone: a narrow glyph ('j', ':') stands
        # in a wide cell. (Looked at only where a gap would split: most words have none.)
        if split is not None and not chars.bold_mono(start + first)[1]:
            out += (part[at:first], split)
            at = first + len(word)
            chars.splits += split.count(" ")
    if not out:
        return part
    out.append(part[at:])
    return "".join(out)


def _candidates(part: str) -> list[tuple[int, str]]:
    """(offset, word) of each _WORD in `part`: no _WORD holds a space, so each is one in a
    stretch between two spaces, found on its own."""
    found: list[tuple[int, str]] = []
    at = 0
    hint, words, long_word, shortest = _SHORT_HINT.search, _WORD.finditer, _LONG_WORD, _SHORTEST_WORD
    for stretch in part.split(" "):
        size = len(stretch)
        if size >= long_word or (size >= shortest and hint(stretch)):
            for word in words(stretch):
                found.append((at + word.start(), word.group()))
        at += size + 1
    return found


def respaced(chars: Chars, part: str, start: int, size: float) -> str:
    """`part` measured letter by letter, on a page where PDFium runs words together: a space
    wherever two letters of a word stand a space apart, and none where a space stands
    between two letters that touch (Ghostscript sets a space glyph and moves the pen back
    over it: "inv oke", "hav e"). A word's usual gap is its own median gap; a word of two or
    three letters has too few gaps for one, and the line's stands in."""
    lefts, rights = chars.boxes(start, len(part))
    inner = sorted(
        lefts[at] - rights[at - 1]
        for at in range(1, len(part))
        if not part[at].isspace() and not part[at - 1].isspace()
    )
    line_usual = inner[len(inner) // 2] if inner else 0.0
    out: list[str] = []
    at = 0
    for word in _TOKEN.finditer(part):
        begin, end = word.span()
        space = part[at:begin]
        if space == " " and begin > 1 and part[begin - 2].isalpha() and part[begin].isalpha():
            # A space glyph (PDFium's own spaces have no width) with the letters around it
            # touching: the ink of the one before, or where the space was set (an 'f' reaches
            # past its advance), stands as close to the one after as letters in a word do.
            glyph, before = rights[begin - 1] > lefts[begin - 1], min(rights[begin - 2], lefts[begin - 1])
            space = "" if glyph and lefts[begin] - before < _NO_SPACE * size else space
        out.append(space)
        gaps = [lefts[offset] - rights[offset - 1] for offset in range(begin + 1, end)]
        usual = sorted(gaps)[len(gaps) // 2] if len(gaps) >= _OWN_GAPS else line_usual
        # Short words of letters only: numbers in a table's narrow columns stand apart.
        short = len(gaps) < _OWN_GAPS
        split = _split(word.group(), gaps, usual, size) if gaps and not (short and not word.group().isalpha()) else None
        if split is not None and not chars.bold_mono(start + begin)[1]:
            chars.splits += split.count(" ")
            out.append(split)
        else:
            out.append(word.group())
        at = end
    out.append(part[at:])
    return "".join(out)


def _split_at_gaps(chars: Chars, word: str, first: int, size: float) -> str | None:
    gaps = chars.gaps(first, len(word))
    if max(gaps, default=0.0) <= _SPACE_GAP * size:
        return None
    return _split(word, gaps, sorted(gaps)[len(gaps) // 2], size)


def _split(word: str, gaps: list[float], usual: float, size: float) -> str | None:
    """Split where the gap between two characters is a space's: wider than _SPACE_GAP of the
    size, and wider by _SPACE_GAP_OVER than the word's usual gap (some writers space every
    letter of a word out: that is no space). None where it has no such gap."""
    space = _SPACE_GAP * size
    pieces, begin = [], 0
    for offset, gap in enumerate(gaps, 1):
        if gap > space and gap > usual + _SPACE_GAP_OVER * size and _parts_here(word, offset):
            pieces.append(word[begin:offset])
            begin = offset
    if not pieces:
        return None
    pieces.append(word[begin:])
    return " ".join(pieces)


def _parts_here(word: str, offset: int) -> bool:
    """A gap can be a space between two letters or digits, or after a comma, semicolon or
    colon before a letter; not beside other punctuation, whose glyphs stand in wider cells
    in code (`install.patch`, `/usr/bin`, `fix-gentoo`)."""
    before, after = word[offset - 1], word[offset]
    return after.isalnum() and (before.isalnum() or before in ",;:")
