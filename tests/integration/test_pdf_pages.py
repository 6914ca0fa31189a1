"""A PDF hit names the page a viewer shows (issue 59): its number counts blank pages, and
where the PDF defines page labels ("i", "ii", "1") the hit carries the label too, only to a
caller who may read the document. Through the Python API a user runs, on a real database."""

from __future__ import annotations

from ingestion_pipeline import Index
from ingestion_pipeline.api import Reader
from tests.fixtures.pdf_layout import make_layout_pdf, paragraph_lines

PREFACE = "The preface thanks the albatross wardens of the southern islands for their patience."
CHAPTER = "Chapter one counts the petrels nesting on the eastern cliffs every spring morning."
BLANK: list = []


def labelled_pdf() -> bytes:
    pages = [
        paragraph_lines(PREFACE, top=700),
        BLANK,  # a blank page: still page 2
        paragraph_lines(CHAPTER, top=700),
    ]
    return make_layout_pdf(pages, page_labels={0: ("r", "", 1), 2: ("D", "", 1)})


def test_a_pdf_hit_names_its_page_and_label(db_url: str) -> None:
    with Index.open(db_url) as index:
        index.enqueue_bytes(labelled_pdf(), key="app://birds.pdf", name="birds.pdf")
        index.enqueue_bytes(
            make_layout_pdf([paragraph_lines(CHAPTER.replace("petrels", "gannets"), top=700)]),
            key="app://plain.pdf",
            name="plain.pdf",
        )
        assert index.work(drain=True).outcomes["completed"] == 2
        preface, chapter = index.search("albatross wardens")[0], index.search("petrels eastern cliffs")[0]
        assert (preface.source_name, preface.page, preface.page_label) == ("birds.pdf", 1, "i")
        assert (chapter.source_name, chapter.page, chapter.page_label) == ("birds.pdf", 3, "1")
        plain = index.search("gannets eastern cliffs")[0]
        assert (plain.source_name, plain.page, plain.page_label) == ("plain.pdf", 1, None)
        # The anonymous reader may read no collection here: no hit, and no label of one.
        assert index.search("albatross wardens", reader=Reader(), mode="lexical") == []
