"""A PDF page's characters as PDFium places them: boxes, origins, sizes and fonts, read through
buffers bound once per page, so that a line costs a few calls into PDFium and a word measured
letter by letter costs one call a letter.

The calls go to PDFium's functions without ctypes' conversion of their arguments: converting
the pointer arguments costs more than the call itself (GetCharBox: 2 µs a call with them
converted, 0.35 µs without), and the separation of words (words.py) makes one call per
character it measures.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

import pypdfium2.raw as pdfium_c

# Bold by the font's name where the weight is not set (TeX's Computer Modern Bold Extended
# CMBX reports 545): the usual name parts of bold and semibold cuts.
_BOLD_NAME = re.compile(r"bold|black|heavy|demi|semibold|CMBX|SFBX|CMB\d|-Medi", re.IGNORECASE)
_MONO_NAME = re.compile(r"mono|courier|CMTT|SFTT|xtt|typewriter|consol|code", re.IGNORECASE)
_BOLD_WEIGHT = 600
_FIXED_PITCH = 1  # bit 1 of a font descriptor's /Flags


def _unconverted(function: Any, restype: Any = ctypes.c_int) -> Any:
    """PDFium's `function` without argument conversion: its arguments must be what the C
    function takes (the text page as a c_void_p, ints, byref()s, ctypes buffers and numbers)."""
    address = ctypes.cast(function, ctypes.c_void_p).value
    if address is None:  # never: a function of the loaded library
        raise RuntimeError(f"PDFium's {function.__name__} has no address")
    return ctypes.CFUNCTYPE(restype)(address)


_CHAR_BOX = _unconverted(pdfium_c.FPDFText_GetCharBox)
_CHAR_ORIGIN = _unconverted(pdfium_c.FPDFText_GetCharOrigin)
_FONT_INFO = _unconverted(pdfium_c.FPDFText_GetFontInfo, ctypes.c_ulong)
_FONT_WEIGHT = _unconverted(pdfium_c.FPDFText_GetFontWeight)
_FONT_SIZE = _unconverted(pdfium_c.FPDFText_GetFontSize, ctypes.c_double)
_TEXT_OBJECT = _unconverted(pdfium_c.FPDFText_GetTextObject, ctypes.c_void_p)
_LOOSE_BOX = _unconverted(pdfium_c.FPDFText_GetLooseCharBox)
_RECT = _unconverted(pdfium_c.FPDFText_GetRect)


class Chars:
    """One text page's characters, by index (PDFium's, which the page's text offsets are)."""

    def __init__(self, textpage: pdfium_c.FPDF_TEXTPAGE) -> None:
        self.handle = ctypes.cast(textpage, ctypes.c_void_p)
        self._name = ctypes.create_string_buffer(128)
        self._name_size = ctypes.c_ulong(len(self._name))
        self._flags = ctypes.c_int()
        self._flags_ref = ctypes.byref(self._flags)
        self._fonts: dict[tuple[bytes, int], tuple[bool, bool]] = {}
        self._x, self._y = ctypes.c_double(), ctypes.c_double()
        self._origin_refs = (ctypes.byref(self._x), ctypes.byref(self._y))
        self._box = [ctypes.c_double() for _ in range(4)]
        self._box_refs = [ctypes.byref(value) for value in self._box]
        self._loose = pdfium_c.FS_RECTF()
        self._loose_ref = ctypes.byref(self._loose)
        self.splits = 0  # words split at a gap on this page (words.py)

    def origin(self, index: int) -> tuple[float, float]:
        _CHAR_ORIGIN(self.handle, index, *self._origin_refs)
        return self._x.value, self._y.value

    def right(self, index: int) -> float:
        _CHAR_BOX(self.handle, index, *self._box_refs)  # left, right, bottom, top
        return float(self._box[1].value)

    def size(self, index: int) -> float:
        return float(_FONT_SIZE(self.handle, index))

    def gaps(self, first: int, count: int) -> list[float]:
        """The gap between the boxes of each of `count` characters from `first` and the one
        before it (count - 1 gaps): the loop the separation of words spends its time in."""
        get, handle, (ref0, ref1, ref2, ref3) = _CHAR_BOX, self.handle, self._box_refs
        left, right = self._box[0], self._box[1]
        get(handle, first, ref0, ref1, ref2, ref3)
        before = right.value
        gaps: list[float] = []
        append = gaps.append
        for index in range(first + 1, first + count):
            get(handle, index, ref0, ref1, ref2, ref3)
            append(left.value - before)
            before = right.value
        return gaps

    def boxes(self, first: int, count: int) -> tuple[list[float], list[float]]:
        """Left and right edges of `count` characters from `first`."""
        get, handle, (ref0, ref1, ref2, ref3) = _CHAR_BOX, self.handle, self._box_refs
        left, right = self._box[0], self._box[1]
        lefts: list[float] = []
        rights: list[float] = []
        for index in range(first, first + count):
            get(handle, index, ref0, ref1, ref2, ref3)
            lefts.append(left.value)
            rights.append(right.value)
        return lefts, rights

    def rects(self, count: int) -> list[tuple[float, float, float, float]]:
        """The first `count` of the rectangles PDFium's last FPDFText_CountRects on this text
        page computed: left, top, right, bottom."""
        get, handle, (ref0, ref1, ref2, ref3) = _RECT, self.handle, self._box_refs
        left, top, right, bottom = self._box
        rects = []
        for index in range(count):
            get(handle, index, ref0, ref1, ref2, ref3)
            rects.append((left.value, top.value, right.value, bottom.value))
        return rects

    def objects(self, first: int, count: int) -> list[int | None]:
        """The text object (its address; None for a character PDFium made up, such as the
        spaces it puts between words) of each of `count` characters from `first`."""
        get, handle = _TEXT_OBJECT, self.handle
        return [get(handle, index) for index in range(first, first + count)]

    def advance_end(self, index: int) -> float:
        """Where the character's advance ends (its loose box's right edge)."""
        _LOOSE_BOX(self.handle, index, self._loose_ref)
        return float(self._loose.right)

    def font_name(self, index: int) -> bytes:
        _FONT_INFO(self.handle, index, self._name, self._name_size, self._flags_ref)
        return bytes(self._name.value)

    def bold_mono(self, index: int) -> tuple[bool, bool]:
        """Whether the character's font is bold, and fixed-pitch: by the font's name, flags
        and weight, looked at once per font (name and flags)."""
        _FONT_INFO(self.handle, index, self._name, self._name_size, self._flags_ref)
        key = (self._name.value, self._flags.value)
        font = self._fonts.get(key)
        if font is None:
            name = key[0].decode("latin-1")
            name = name.partition("+")[2] or name  # a subset's prefix: ABCDEF+CMBX12
            bold = bool(_BOLD_NAME.search(name)) or _FONT_WEIGHT(self.handle, index) >= _BOLD_WEIGHT
            font = bold, bool(key[1] & _FIXED_PITCH) or bool(_MONO_NAME.search(name))
            self._fonts[key] = font
        return font
