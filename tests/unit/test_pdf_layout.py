"""What a PDF becomes (issue 59), on PDFs laid out by tests/fixtures/pdf_layout.py: every
word separated however the content stream spaces them, wrapped lines joined into
paragraphs, running headers, footers and page numbers gone, sections at the outline's or
the typography's headings, and pages named by their PDF number and label."""

from __future__ import annotations

import pypdfium2 as pdfium
import pytest

from ingestion_pipeline.processing import ProcessingError, parse
from ingestion_pipeline.processing.headings import heading_paths
from ingestion_pipeline.processing.pdf import reading
from ingestion_pipeline.processing.pdf.lines import Spacing, read_page
from tests.fixtures.pdf_layout import Line, OutlineEntry, make_layout_pdf, paragraph_lines, table_lines

MAX = 10 * 1024 * 1024
LOREM = (
    "Pelicans are large water birds with a long beak and a big throat pouch used for catching prey"
    " and draining water from the scooped-up contents before swallowing. They have predominantly pale"
    " plumage, the exceptions being the brown and Peruvian pelicans."
)
SECOND = (
    "The bill is long and hooked at the tip; the pouch beneath it holds three times what the stomach"
    " does, and the bird tips the water out before it swallows the fish it caught."
)


def body(text: str, top: float, **kwargs: object) -> list[Line]:
    return paragraph_lines(text, top=top, **kwargs)  # type: ignore[arg-type]


def furnished(number: int, lines: list[Line]) -> list[Line]:
    """A page with a running header and a page number, the way books print them."""
    return [
        Line(f"Chapter 2: Water birds {number + 1}", y=760, x=300, size=9),
        *lines,
        Line(str(number + 1), y=40, x=300),
    ]


@pytest.mark.parametrize("spacing", ["spaces", "words", "kerning"])
def test_every_word_separated_and_wrapped_lines_joined(spacing):
    lines = body(LOREM, 700, spacing=spacing) + body(SECOND, 600, spacing=spacing)
    assert len(lines) > 4  # wrapped
    document = parse(make_layout_pdf([lines]), "birds.pdf", max_bytes=MAX)
    assert document.pages[0].text == f"{LOREM}\n\n{SECOND}"


def test_short_lines_keep_their_breaks_and_code_its_lines():
    lines = [
        Line("Send mail to:", y=700),
        Line("The Pelican Society", y=687),
        Line("12 Harbour Road", y=674),
        Line("while true; do", y=640, mono=True),
        Line("  scoop fish", y=627, mono=True),
        Line("done", y=614, mono=True),
    ]
    document = parse(make_layout_pdf([lines]), "address.pdf", max_bytes=MAX)
    assert document.pages[0].text == (
        "Send mail to:\nThe Pelican Society\n12 Harbour Road\n\nwhile true; do\nscoop fish\ndone"
    )


def test_running_headers_and_page_numbers_are_removed():
    pages = [furnished(n, body(f"Page {n + 1} tells of pelican number {n + 1}. " + SECOND, 700)) for n in range(4)]
    document = parse(make_layout_pdf(pages), "furnished.pdf", max_bytes=MAX)
    for number, page in enumerate(document.pages):
        assert page.text == f"Page {number + 1} tells of pelican number {number + 1}. {SECOND}"
    assert not any("Chapter 2" in section.text for section in document.sections)


def test_a_line_like_the_header_inside_the_body_stays():
    pages = [furnished(n, body(SECOND, 700)) for n in range(4)]
    pages[2].insert(2, Line("Chapter 2: Water birds 3", y=500))  # quoted in the body
    document = parse(make_layout_pdf(pages), "quoted.pdf", max_bytes=MAX)
    assert "Chapter 2: Water birds 3" in document.pages[2].text


def test_a_watermark_on_every_page_is_removed():
    pages = [
        [
            *body(f"Pelican {n} is the subject of this page. " + SECOND, 700),
            Line("DRAFT", y=560, x=250, size=30),
            *body(LOREM, 450),
        ]
        for n in range(4)
    ]
    document = parse(make_layout_pdf(pages), "draft.pdf", max_bytes=MAX)
    assert [p.text for p in document.pages] == [
        f"Pelican {n} is the subject of this page. {SECOND}\n\n{LOREM}" for n in range(4)
    ]


def outlined_pages() -> list[list[Line]]:
    return [
        [Line("Pelicans", y=700, size=24, bold=True), *body(LOREM, 660)],
        [
            Line("1 Feeding", y=700, size=16, bold=True),
            *body(LOREM, 670),
            Line("1.1 The pouch", y=560, size=13, bold=True),
            *body(SECOND, 535),
        ],
        [*body(SECOND, 700), Line("2 Nesting", y=600, size=16, bold=True), *body(LOREM, 570)],
    ]


OUTLINE = [
    OutlineEntry("Feeding", 1, 716, children=(OutlineEntry("The pouch", 1, 574),)),
    OutlineEntry("Nesting", 2, 616),
    OutlineEntry("Index", 2, 400),  # nothing printed where it points: a section of its title
]


def test_sections_at_the_outlines_headings():
    document = parse(make_layout_pdf(outlined_pages(), outline=OUTLINE), "outlined.pdf", max_bytes=MAX)
    sections = [(s.heading, s.level, s.page_ordinal) for s in document.sections]
    assert sections == [
        ("Pelicans", 1, 0),
        ("1 Feeding", 1, 1),
        ("1.1 The pouch", 2, 1),
        ("1.1 The pouch", 2, 2),  # the section goes on over the page break, on its own page
        ("2 Nesting", 1, 2),
        ("Index", 1, 2),
    ]
    paths = heading_paths(document.sections)
    pouch = next(s for s in document.sections if s.heading == "1.1 The pouch")
    assert paths[pouch.ordinal] == "1 Feeding › 1.1 The pouch"
    assert pouch.text.startswith("1.1 The pouch\n\n")
    assert document.title == "Pelicans"


def test_headings_from_typography_without_an_outline():
    document = parse(make_layout_pdf(outlined_pages()), "plain.pdf", max_bytes=MAX)
    levels = {s.heading: s.level for s in document.sections if s.heading}
    assert levels == {"Pelicans": 1, "1 Feeding": 1, "1.1 The pouch": 2, "2 Nesting": 1}


def test_two_columns_read_column_by_column():
    left = body(LOREM, 700, width=220)
    right = body(SECOND, 700, x=320, width=220)
    document = parse(make_layout_pdf([left + right]), "columns.pdf", max_bytes=MAX)
    assert document.pages[0].text == f"{LOREM}\n\n{SECOND}"


def test_pages_keep_their_numbers_and_labels():
    pages = [body("Preface text.", 700), [], body("Chapter text.", 700), body("More text.", 700)]
    document = parse(
        make_layout_pdf(pages, page_labels={0: ("r", "", 1), 2: ("D", "", 1)}),
        "labelled.pdf",
        max_bytes=MAX,
        ocr=reading.OcrOptions(enabled=False),
    )
    assert [p.ordinal for p in document.pages] == [0, 1, 2, 3]
    assert document.page_labels == ("i", "ii", "1", "2")
    assert [s.page_ordinal for s in document.sections] == [0, 2, 3]


def test_page_numbers_alone_have_no_labels():
    document = parse(make_layout_pdf([body("One.", 700), body("Two.", 700)]), "plain.pdf", max_bytes=MAX)
    assert document.page_labels == ()


def test_a_pdf_claiming_too_many_pages_fails_alone_in_one_line(monkeypatch):
    monkeypatch.setattr(reading, "MAX_PAGES", 3)
    with pytest.raises(ProcessingError, match=r"^a PDF of 4 pages: more than the 3 a document may have$"):
        parse(make_layout_pdf([body("x", 700)] * 4), "bomb.pdf", max_bytes=MAX)


def test_a_table_becomes_markdown_rows_under_its_header():
    rows = [
        ["Attribute", "Type", "Meaning"],
        ["name", "text", "the name of the thing"],
        ["size", "", "bytes on disk"],  # an empty cell keeps its column
        ["mtime", "timestamp", "last change"],
    ]
    lines = [
        *body("The attributes of a file follow in the table below.", 700),
        *table_lines(rows, top=660, xs=[72, 200, 300], bold_header=True),
        *body("Prose goes on after the table.", 580),
    ]
    document = parse(make_layout_pdf([lines]), "table.pdf", max_bytes=MAX)
    assert document.pages[0].text == (
        "The attributes of a file follow in the table below.\n\n"
        "| Attribute | Type | Meaning |\n| --- | --- | --- |\n| name | text | the name of the thing |\n"
        "| size | | bytes on disk |\n| mtime | timestamp | last change |\n\n"
        "Prose goes on after the table."
    )


def test_a_bold_numbered_sentence_is_a_list_item_not_a_heading():
    lines = [
        Line("Escaping", y=700, size=16, bold=True),
        *body("To put a backslash in the text, do two things.", 670),
        Line("1. Double all backslashes.", y=640, bold=True),
        Line("2.1 Where backslashes go", y=600, bold=True),
        *body(SECOND, 580),
    ]
    document = parse(make_layout_pdf([lines]), "list.pdf", max_bytes=MAX)
    assert [s.heading for s in document.sections] == ["Escaping", "2.1 Where backslashes go"]


def test_code_and_well_spaced_words_are_not_split():
    """The letter-gap rule that separates words PDFium runs together leaves code in a
    fixed-pitch font alone (a '.' stands in a wide cell) and never splits a word set normally."""
    lines = [
        Line("see debian/patches/install.patch and /usr/local/bin/configuration", y=700, mono=True),
        Line("Internationalization configurations notwithstanding, everything worked.", y=680),
    ]
    text = parse(make_layout_pdf([lines]), "code.pdf", max_bytes=MAX).pages[0].text
    assert text == (
        "see debian/patches/install.patch and /usr/local/bin/configuration\n\n"
        "Internationalization configurations notwithstanding, everything worked."
    )


@pytest.mark.parametrize("spacing", ["spaces", "words", "kerning"])
def test_a_document_spaced_as_usual_is_never_measured_letter_by_letter(spacing):
    """Only pages where PDFium runs words together are measured letter by letter (and the
    pages after them, when most pages did): a document whose spaces PDFium reads has none."""
    pages = [body(LOREM, 700, spacing=spacing) + body(SECOND, 600, spacing=spacing) for _ in range(3)]
    document = pdfium.PdfDocument(make_layout_pdf(pages))
    spacing_seen = Spacing()
    texts = [" ".join(line.text for line in read_page(document, index, spacing_seen).lines) for index in range(3)]
    assert spacing_seen.pages == 3 and spacing_seen.run_together == 0 and not spacing_seen.every_word
    assert texts == [f"{LOREM} {SECOND}"] * 3
