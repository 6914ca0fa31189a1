"""parse(): each format's fixture gives the right title, pages and sections; the checks
every upload goes through raise ProcessingError with a message for the uploader."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion_pipeline.processing import ProcessingError, parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MAX = 10 * 1024 * 1024


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def headings(document):
    return [(s.heading, s.level) for s in document.sections]


def assert_dense(document):
    assert [p.ordinal for p in document.pages] == list(range(len(document.pages)))
    assert [s.ordinal for s in document.sections] == list(range(len(document.sections)))
    page_ordinals = {p.ordinal for p in document.pages}
    assert all(s.page_ordinal in page_ordinals for s in document.sections)


def test_plain_text_fixture():
    document = parse(fixture("sample.txt"), "sample.txt", max_bytes=MAX)
    assert document.mime_type == "text/plain"
    assert document.title == "Field Notes on Foxes"
    assert len(document.pages) == 2  # split at the form feed
    assert headings(document) == [(None, 1), (None, 1)]
    assert [s.page_ordinal for s in document.sections] == [0, 1]
    assert "the quick brown fox of plaintext" in " ".join(document.sections[0].text.split())
    assert_dense(document)


def test_plain_text_keeps_paragraph_breaks_and_collapses_spaces():
    document = parse(b"  one   two\t\tthree  \r\n\r\n\r\n\r\nfour\n", "a.txt", max_bytes=MAX)
    assert document.pages[0].text == "one two three\n\nfour"


def test_plain_text_title_is_none_when_first_line_is_long():
    document = parse(("word " * 40).encode() + b"\n\nmore", "long.txt", max_bytes=MAX)
    assert document.title is None


def test_plain_text_empty_pages_are_dropped_and_ordinals_stay_dense():
    document = parse(b"first page\f \n \f\fthird page", "pages.txt", max_bytes=MAX)
    assert [p.text for p in document.pages] == ["first page", "third page"]
    assert [s.page_ordinal for s in document.sections] == [0, 1]
    assert_dense(document)


def test_markdown_fixture():
    document = parse(fixture("sample.md"), "sample.md", max_bytes=MAX)
    assert document.mime_type == "text/markdown"
    assert document.title == "Walrus Field Guide"
    assert len(document.pages) == 1
    assert headings(document) == [
        (None, 1),  # the preamble before the first heading (front matter is not text)
        ("Walrus Field Guide", 1),
        ("Migration", 2),
        ("Diet", 2),
        ("Feeding technique", 3),
    ]
    assert_dense(document)
    texts = [s.text for s in document.sections]
    assert "layout: post" not in document.pages[0].text
    assert "markdown walrus migration" in " ".join(texts[1].split())
    assert "**" not in texts[1] and "](" not in texts[2]  # inline markup stripped
    assert "females and calves travel first\nadult males follow later\n" in texts[2]
    assert "route: Bering Sea -> Chukchi Sea" in texts[2]  # code kept as text
    assert "clams | most" in texts[3]
    assert texts[4].startswith("Feeding technique\n\n")


@pytest.mark.parametrize(
    ("source", "title"),
    [
        (b"## Second\n\n# First top\n\ntext", "First top"),
        (b"intro\n\n### Only heading\n\ntext", "Only heading"),
        (b"No headings here\n\njust text", "No headings here"),
        (b"---\ntitle: 'From front matter'\n---\n# Heading\n", "From front matter"),
    ],
)
def test_markdown_title_rules(source, title):
    assert parse(source, "t.md", max_bytes=MAX).title == title


def test_markdown_without_preamble_has_no_headless_section():
    document = parse(b"# A\n\none\n\n## B\n\ntwo", "x.md", max_bytes=MAX)
    assert headings(document) == [("A", 1), ("B", 2)]
    assert document.sections[1].text == "B\n\ntwo"


def test_html_fixture():
    document = parse(fixture("sample.html"), "sample.html", max_bytes=MAX)
    assert document.mime_type == "text/html"
    assert document.title == "Heron Habitats of the Wetlands"
    assert len(document.pages) == 1
    assert headings(document) == [
        (None, 1),
        ("Herons", 1),
        ("Where they live", 2),
        ("What they eat", 2),
    ]
    assert_dense(document)
    page = document.pages[0].text
    assert "html heron habitat" in page
    for hidden in ("trackingCode", "font-family", "not text either", "a comment", "enable JavaScript"):
        assert hidden not in page
    assert "reed beds\nriver banks" in document.sections[2].text
    assert "Fish, frogs\nand the occasional vole." in document.sections[3].text
    assert "wingspan: 1.8 m\nheight: 1.0 m" in document.sections[3].text


def test_html_title_falls_back_to_first_h1():
    document = parse(b"<html><body><h2>Sub</h2><h1>Main</h1><p>x</p></body></html>", "p.html", max_bytes=MAX)
    assert document.title == "Main"


def test_html_defined_terms_are_sections_under_their_heading():
    """A `<dt id=…>` names what follows (an API entry, a parameter): a section one level
    below the heading or term it is in; a plain `<dt>` (no anchor) stays text."""
    page = (
        "<h1>Core</h1><h2>Expressions</h2><dl><dt id='m.Over'>class m.Over(a)</dt><dd><p>A window.</p>"
        "<dl><dt id='m.Over.rows'>rows</dt><dd>The frame.</dd></dl></dd></dl>"
        "<dl><dt>Note</dt><dd>Plain.</dd></dl><h2>Types</h2><p>More.</p>"
    )
    document = parse(page.encode(), "api.html", max_bytes=MAX)
    assert headings(document) == [
        ("Core", 1), ("Expressions", 2), ("class m.Over(a)", 3), ("rows", 4), ("Types", 2),
    ]  # fmt: skip
    assert "Note" in document.sections[3].text  # the plain term is the text of the term before it


def test_html_without_extension_is_parsed_as_html():
    document = parse(b"<!doctype html><title>T</title><h1>H</h1><p>body</p>", "upload-123", max_bytes=MAX)
    assert document.mime_type == "text/html"
    assert headings(document) == [("H", 1)]


def test_deeply_nested_html_does_not_hit_the_recursion_limit():
    html = b"<html><body>" + b"<div>" * 5000 + b"deep text" + b"</div>" * 5000 + b"</body></html>"
    assert parse(html, "deep.html", max_bytes=MAX).pages[0].text == "deep text"


def test_nul_and_control_characters_never_reach_the_text():
    text = "A stray NUL\x00 and a bell\x07 inside an otherwise ordinary sentence."
    document = parse(b"\xff\xfe" + text.encode("utf-16-le"), "u.txt", max_bytes=MAX)
    assert document.pages[0].text == "A stray NUL and a bell inside an otherwise ordinary sentence."


# --- errors every upload can hit ------------------------------------------------------


def test_empty_file():
    with pytest.raises(ProcessingError, match=r"^file is empty$"):
        parse(b"", "empty.txt", max_bytes=MAX)


@pytest.mark.parametrize("content", [b"  \n\t\r\n ", "\ufeff   \n".encode("utf-16")])
def test_whitespace_only_file(content):
    with pytest.raises(ProcessingError, match=r"^file is empty: it contains only whitespace$"):
        parse(content, "blank.txt", max_bytes=MAX)


def test_oversize_file_is_refused_before_anything_else():
    size = 60 * 1024 * 1024
    with pytest.raises(ProcessingError) as caught:
        parse(b"\x00" * size, "huge.bin", max_bytes=50 * 1024 * 1024)
    assert str(caught.value) == "file is 60.0 MB, over the 50.0 MB limit"


def test_oversize_by_a_few_bytes_reads_exactly():
    with pytest.raises(ProcessingError, match=r"^file is 1,048,577 bytes, over the 1,048,576-byte limit$"):
        parse(b"a" * (1024 * 1024 + 1), "a.txt", max_bytes=1024 * 1024)


def test_file_at_the_limit_is_accepted():
    assert parse(b"a" * 200, "a.txt", max_bytes=200).pages[0].text == "a" * 200


def test_html_with_no_text():
    with pytest.raises(ProcessingError, match=r"^no text could be extracted"):
        parse(b"<html><head><script>x()</script></head><body> </body></html>", "s.html", max_bytes=MAX)


def test_binary_upload_is_refused_by_parse():
    with pytest.raises(ProcessingError, match=r"looks like binary data \(ZIP archive\) although named report\.txt"):
        parse(b"PK\x03\x04" + bytes(100), "report.txt", max_bytes=MAX)


def test_bad_max_bytes_is_a_programming_error():
    with pytest.raises(ValueError):
        parse(b"text", "a.txt", max_bytes=0)


def test_empty_headings_do_not_start_sections():
    html = parse(b"<h1>Real</h1><p>one</p><h2> </h2><p>two</p>", "e.html", max_bytes=MAX)
    assert headings(html) == [("Real", 1)]
    assert html.sections[0].text == "Real\n\none\n\ntwo"
    markdown = parse(b"# Real\n\none\n\n##\n\ntwo", "e.md", max_bytes=MAX)
    assert headings(markdown) == [("Real", 1)]


def test_raw_html_in_markdown_keeps_text_and_drops_scripts():
    source = b'# T\n\n<div class="note">\n<b>Boxed</b> note\n<script>alert(1)</script>\n</div>\n'
    text = parse(source, "raw.md", max_bytes=MAX).sections[0].text
    assert "Boxed note" in " ".join(text.split())
    assert "alert" not in text and "<div" not in text
