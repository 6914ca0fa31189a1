"""gropdf (groff -Tpdf) ends a TJ array with a word space and an empty string before a font
change: `[(height. The) -250 ()] TJ /F2 10 Tf [(width) -250] TJ`. PDFium loses that space: the
bold word touches the one before ("Thewidth") and the text after it stands a space to the left
until the next Td puts it back, which opens a space inside a word ("k eyword"). The reader
moves the space back (pdf/shifts.py, issue 59). The PDF below is that content stream, as
gropdf wrote it for groff's pic manual, built by hand so that no groff is needed."""

from __future__ import annotations

import pypdfium2 as pdfium
import pytest

from ingestion_pipeline.processing import parse

_LINE = b"""1 0 0 1 72 700 Tm
2.5 Tw [(height. The) -250 ()] TJ
/F2 10 Tf
0 Tw [(width) -250] TJ
/F1 10 Tf
0 Tw (k) Tj
82.4 0 Td
0 Tw (e) Tj
4.29 0 Td
0 Tw (yw) Tj
12.12 0 Td
0 Tw [(ord may be abbreviated to wid.)] TJ
"""


def _pdf(first_line: bytes) -> bytes:
    stream = b"BT\n1 0 0 1 72 720 Tm\n/F1 10 Tf\n0 Tw [(" + first_line + b")] TJ\n" + _LINE + b"ET\n"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R /F2 6 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%sendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Times-Bold /Encoding /WinAnsiEncoding >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


def _texts(pdf: bytes) -> tuple[str, str]:
    raw = pdfium.PdfDocument(pdf)[0].get_textpage().get_text_range()
    return raw, " ".join(parse(pdf, "pic.pdf", max_bytes=10**6).pages[0].text.split())


def test_a_space_pdfium_moved_goes_back_to_the_font_change() -> None:
    raw, text = _texts(_pdf(b"A keyword names an attribute of the box."))
    assert "Thewidth k eyword" in raw  # what PDFium alone reads
    assert "height. The width keyword may be abbreviated to wid." in text


@pytest.mark.parametrize("first_line", [b"A token names an attribute of the box.", b"Nothing else."])
def test_left_alone_where_the_parts_make_no_word_of_the_document(first_line: bytes) -> None:
    """A word in another font may touch the one before ("<latexonly>"), and a space at a
    re-positioning may be a real one: the space is moved only where the two parts at the
    gap make a word the document has elsewhere."""
    raw, text = _texts(_pdf(first_line))
    assert "Thewidth k eyword" in raw
    assert "Thewidth k eyword" in text
