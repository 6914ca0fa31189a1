"""The layout PDF fixture (tests/fixtures/pdf_layout.py) read back by PDFium and pypdf: words
separated (or not) as each spacing mode promises, the width tables equal to PDFium's built-in
metrics, fonts, bookmarks and page labels as written."""

from __future__ import annotations

import ctypes
import io

import pypdf
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest

from tests.fixtures.pdf_layout import (
    Line,
    OutlineEntry,
    make_layout_pdf,
    paragraph_lines,
    table_lines,
    text_width,
)

SENTENCE = "The quick brown fox jumps over the lazy dog"
PRINTABLE = "".join(chr(c) for c in range(33, 127))
FONTS = [(False, False), (True, False), (False, True)]  # (bold, mono): Helvetica, Helvetica-Bold, Courier


def _text(data: bytes, page: int = 0) -> str:
    return pdfium.PdfDocument(data)[page].get_textpage().get_text_range()


def _origin_x(textpage: pdfium.PdfTextPage, index: int) -> float:
    x, y = ctypes.c_double(), ctypes.c_double()
    assert pdfium_c.FPDFText_GetCharOrigin(textpage, index, x, y)
    return x.value


def test_text_width_uses_the_standard_metrics() -> None:
    assert text_width(" ", 1000) == 278
    assert text_width("a", 1000) == 556
    assert text_width("b", 1000, bold=True) == 611
    assert text_width("Wi", 10, mono=True) == 12
    assert text_width("é", 11) == text_width("e", 11)


@pytest.mark.parametrize(("bold", "mono"), FONTS)
def test_the_width_tables_match_pdfium(bold: bool, mono: bool) -> None:
    """Every printable ASCII glyph advances as PDFium's built-in font metrics say, but one: PDFium's
    Helvetica-Bold draws "@" 1072/1000 em wide where the Adobe AFM (our table, pypdf's) says 975."""
    line = Line(PRINTABLE, y=700, x=50, size=10, bold=bold, mono=mono)
    textpage = pdfium.PdfDocument(make_layout_pdf([[line]]))[0].get_textpage()
    assert textpage.get_text_range() == PRINTABLE
    origins = [_origin_x(textpage, i) for i in range(len(PRINTABLE))]
    for i, char in enumerate(PRINTABLE[:-1]):
        expected = 10.72 if bold and char == "@" else text_width(char, 10, bold, mono)
        assert origins[i + 1] - origins[i] == pytest.approx(expected, abs=0.01), char


@pytest.mark.parametrize("spacing", ["spaces", "words", "kerning"])
@pytest.mark.parametrize(("bold", "mono"), FONTS)
def test_words_come_out_separated(spacing: str, bold: bool, mono: bool) -> None:
    lines = [Line(SENTENCE, y=700, spacing=spacing, bold=bold, mono=mono), Line("Zweite Zeile", y=680)]
    data = make_layout_pdf([lines])
    assert _text(data).split("\r\n") == [SENTENCE, "Zweite Zeile"]
    textpage = pdfium.PdfDocument(data)[0].get_textpage()
    quick = SENTENCE.index("quick")
    assert _origin_x(textpage, quick) == pytest.approx(72 + text_width("The ", 11, bold, mono), abs=0.01)


def test_words_and_kerning_draw_no_space_glyphs() -> None:
    content = make_layout_pdf([[Line("alpha beta", y=700, spacing="words")]])
    assert b"(alpha) Tj" in content and b"(beta) Tj" in content and b"(alpha beta)" not in content
    content = make_layout_pdf([[Line("alpha beta", y=700, spacing="kerning")]])
    assert b"[(alpha) -278 (beta)] TJ" in content


def test_spacing_none_runs_the_words_together() -> None:
    assert _text(make_layout_pdf([[Line(SENTENCE, y=700, spacing="none")]])) == SENTENCE.replace(" ", "")


def test_latin1_text_and_pdf_special_characters() -> None:
    text = "Café naïve (parens) back\\slash"
    for spacing in ("spaces", "words", "kerning"):
        assert _text(make_layout_pdf([[Line(text, y=700, spacing=spacing)]])) == text


def test_font_size_and_weight_are_visible() -> None:
    lines = [
        Line("Heading", y=700, size=18, bold=True),
        Line("Body text", y=670),
        Line("code()", y=650, size=9, mono=True),
    ]
    textpage = pdfium.PdfDocument(make_layout_pdf([lines]))[0].get_textpage()
    text = textpage.get_text_range()
    seen = []
    for word in ("Heading", "Body", "code"):
        index = text.index(word)
        name = ctypes.create_string_buffer(64)
        flags = ctypes.c_int()
        pdfium_c.FPDFText_GetFontInfo(textpage, index, name, len(name), flags)
        size = pdfium_c.FPDFText_GetFontSize(textpage, index)
        seen.append((name.value.decode(), size, pdfium_c.FPDFText_GetFontWeight(textpage, index)))
    assert seen == [("Helvetica-Bold", 18, 700), ("Helvetica", 11, 400), ("Courier", 9, 400)]


def _book() -> bytes:
    pages = [[Line(f"Page {i}", y=700)] for i in range(6)]
    outline = [
        OutlineEntry("Preface", 0),
        OutlineEntry(
            "Chapter 1",
            2,
            720,
            children=(OutlineEntry("Section 1.1", 3, 500, children=(OutlineEntry("Deep", 3, 300),)),),
        ),
        OutlineEntry("Appendix", 5),
    ]
    labels = {0: ("r", "", 3), 2: ("D", "", 1), 5: ("", "Appendix", 1)}
    return make_layout_pdf(pages, outline=outline, page_labels=labels, title="A Book")


def test_outline_comes_back_from_pdfium() -> None:
    toc = []
    for bookmark in pdfium.PdfDocument(_book()).get_toc():
        dest = bookmark.get_dest()
        mode, pos = dest.get_view()
        toc.append((bookmark.level, bookmark.get_title(), dest.get_index(), mode, pos))
    xyz, fit = pdfium_c.PDFDEST_VIEW_XYZ, pdfium_c.PDFDEST_VIEW_FIT
    assert toc == [
        (0, "Preface", 0, fit, []),
        (0, "Chapter 1", 2, xyz, [0, 720, 0]),
        (1, "Section 1.1", 3, xyz, [0, 500, 0]),
        (2, "Deep", 3, xyz, [0, 300, 0]),
        (0, "Appendix", 5, fit, []),
    ]


def test_page_labels_come_back_from_pdfium() -> None:
    pdf = pdfium.PdfDocument(_book())
    assert [pdf.get_page_label(i) for i in range(len(pdf))] == ["iii", "iv", "1", "2", "3", "Appendix"]


def test_pypdf_opens_the_file() -> None:
    reader = pypdf.PdfReader(io.BytesIO(_book()))
    assert len(reader.pages) == 6
    assert reader.metadata.title == "A Book"
    assert list(reader.page_labels) == ["iii", "iv", "1", "2", "3", "Appendix"]
    assert [item.title for item in reader.outline if not isinstance(item, list)] == [
        "Preface",
        "Chapter 1",
        "Appendix",
    ]
    assert reader.pages[3].extract_text() == "Page 3"


def test_paragraph_lines_wrap_to_the_width() -> None:
    words = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * 12).split()
    lines = paragraph_lines(" ".join(words), top=700, width=300, spacing="words")
    assert len(lines) > 3
    assert all(text_width(line.text, 11) <= 300 for line in lines)
    assert [line.y for line in lines[:3]] == pytest.approx([700, 686.8, 673.6])
    assert " ".join(line.text for line in lines).split() == words
    assert _text(make_layout_pdf([lines])).split("\r\n") == [line.text for line in lines]


def test_table_lines_place_each_cell() -> None:
    rows = [["Name", "Quantity", "Price"], ["Apples", "", "1.20"]]
    cells = table_lines(rows, top=700, xs=[72, 200, 300], bold_header=True)
    assert [(c.text, c.x, c.y, c.bold) for c in cells] == [
        ("Name", 72, 700, True),
        ("Quantity", 200, 700, True),
        ("Price", 300, 700, True),
        ("Apples", 72, 686, False),
        ("1.20", 300, 686, False),
    ]
    assert _text(make_layout_pdf([cells])).split("\r\n") == ["Name Quantity Price", "Apples 1.20"]
