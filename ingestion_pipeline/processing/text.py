"""Bytes to text (encodings) and the whitespace rules every format shares."""

from __future__ import annotations

import codecs
import re
import unicodedata

from charset_normalizer import from_bytes

from .errors import ProcessingError

# UTF-32 before UTF-16: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)
# Real text has almost no control characters; binary data decoded as text has many.
_MAX_CONTROL_RATIO = 0.05
_BINARY_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")  # not tab, newlines, form feed
# charset-normalizer often cannot tell single-byte encodings apart on short texts (it
# guessed cp1257 for French). When cp1252 is nearly as good a fit as its best guess,
# take cp1252: Western European is the common case, and it is what files labelled
# "latin-1" usually are (it decodes every printable latin-1 character the same way).
_WESTERN = "cp1252"
_WESTERN_TOLERANCE = 0.1

_LINE_BREAKS = re.compile(r"\r\n?|[\x0b\x0c\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ufeff]")  # PostgreSQL rejects NUL
# Either of the two above (one scan, rarely a match: then both run).
_BREAK_OR_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_SPACES = re.compile(r"[^\S\n]+")
# Whitespace (str.isspace) other than the space and the line feed: a text with none of it and
# no two spaces in a row has no run to collapse.
OTHER_SPACE = re.compile(r"[\t\x0b\x0c\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_LINE_EDGES = re.compile(r" \n ?|\n ")  # a line's one leading or trailing space, once runs are one space
_BLANK_LINES = re.compile(r"\n{3,}")


def decode_text(content: bytes) -> str:
    """Decode text of any common encoding; ProcessingError when it is not text at all."""
    text = _decode(content)
    if len(_BINARY_CONTROLS.findall(text)) > _MAX_CONTROL_RATIO * len(text):
        raise ProcessingError("looks like binary data (many control characters)")
    return text


def _decode(content: bytes) -> str:
    for bom, codec, label in _BOMS:
        if content.startswith(bom):
            try:
                return content.decode(codec)
            except UnicodeDecodeError:
                raise ProcessingError(
                    f"not valid {label} text although it starts with a {label} byte-order mark"
                ) from None
    utf16 = _bomless_utf16(content)
    if utf16 is not None:
        return utf16
    if b"\x00" in content:
        raise ProcessingError("looks like binary data (it contains NUL bytes)")
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return _decode_legacy(content)


def _bomless_utf16(content: bytes) -> str | None:
    """UTF-16 without a byte-order mark: mostly-ASCII text has a NUL in every other byte."""
    sample = content[:4096]
    if len(sample) < 4 or len(sample) % 2:
        return None
    even_nuls, odd_nuls = sample[0::2].count(0), sample[1::2].count(0)
    half = len(sample) // 2
    # A few NULs on the other side are non-Latin characters (U+0100..U+01FF and the like).
    if odd_nuls > 0.3 * half and even_nuls < 0.05 * half:
        codec = "utf-16-le"
    elif even_nuls > 0.3 * half and odd_nuls < 0.05 * half:
        codec = "utf-16-be"
    else:
        return None
    try:
        return content.decode(codec)
    except UnicodeDecodeError:
        return None


def _decode_legacy(content: bytes) -> str:
    matches = from_bytes(content)
    best = matches.best()
    if best is None:
        raise ProcessingError("looks like binary data (no text encoding fits)")
    encoding = best.encoding
    for match in matches:
        if match.encoding == _WESTERN and match.chaos <= best.chaos + _WESTERN_TOLERANCE:
            encoding = _WESTERN
    # The detector samples large files; a stray byte elsewhere should not lose the text.
    return content.decode(encoding, errors="replace")


def normalize(text: str) -> str:
    """Collapse runs of spaces, keep paragraph breaks as one blank line, trim the ends.

    Each step runs only where a fast scan finds its work (most texts have none): this is a
    twelfth of a PDF's parse otherwise. The same text as stripping every line of the text
    with its runs of whitespace made one space."""
    text = unicodedata.normalize("NFC", text)
    if _BREAK_OR_CONTROL.search(text):
        text = _CONTROLS.sub("", _LINE_BREAKS.sub("\n", text))
    if "  " in text or OTHER_SPACE.search(text):
        text = _SPACES.sub(" ", text)
    if " \n" in text or "\n " in text:
        text = _LINE_EDGES.sub("\n", text)
    if "\n\n\n" in text:
        text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()


def clean_title(value: object) -> str | None:
    """A title on one line, or None when there is nothing left."""
    if value is None:
        return None
    title = " ".join(normalize(str(value)).split())
    return title or None


def first_short_line(text: str, limit: int = 120) -> str | None:
    """The first non-empty line when it is short enough to be a title."""
    for line in text.split("\n"):
        line = line.strip()
        if line:
            return line if len(line) <= limit else None
    return None
