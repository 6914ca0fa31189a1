"""DOCX, XLSX and PPTX through the whole pipeline (enqueue, the worker's parsing children,
search): a phrase from the middle of each finds that file first."""

from __future__ import annotations

import json

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from tests.fixtures.pdf import make_pdf
from tests.helpers import index_folder
from tests.office_files import docx_bytes, pptx_bytes, xlsx_bytes


def test_office_files_are_indexed_and_found(db_url, tmp_path, capsys):
    folder = tmp_path / "office"
    folder.mkdir()
    (folder / "handbook.docx").write_bytes(docx_bytes())
    (folder / "prices.xlsx").write_bytes(xlsx_bytes())
    (folder / "review.pptx").write_bytes(pptx_bytes())
    (folder / "readme.md").write_text("# Readme\n\nNothing about archiving here.\n")
    url = ["--database-url", db_url]
    index_folder(folder, db_url)
    capsys.readouterr()
    for query, expected in {
        "restore point saffron-heron": "handbook.docx",
        "marigold-falls datacenter": "prices.xlsx",
        "lighthouse-cobalt migration": "review.pptx",
        '"Monthly price" Premium': "prices.xlsx",
    }.items():
        assert ingest(["search", query, "--json", "--limit", "3", *url]) == 0
        hits = json.loads(capsys.readouterr().out)
        assert hits and hits[0]["source_name"] == expected, (query, hits)
    with connect(db_url) as conn:
        rows = conn.execute("select source_name, status, mime_type from documents order by 1").fetchall()
    assert [(r["source_name"], r["status"]) for r in rows] == [
        ("handbook.docx", "indexed"),
        ("prices.xlsx", "indexed"),
        ("readme.md", "indexed"),
        ("review.pptx", "indexed"),
    ], rows


def test_show_prints_the_notes_of_what_was_not_read(db_url, tmp_path, capsys, monkeypatch):
    """A PDF with a text page and a page without a text layer, indexed with INGEST_OCR=off:
    the text is indexed and `ingest show` says which pages were skipped, and why."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "mixed.pdf").write_bytes(make_pdf(["The text layer names the sandpiper-quay depot.", ""]))
    url = ["--database-url", db_url]
    monkeypatch.setenv("INGEST_OCR", "off")
    index_folder(folder, db_url)
    capsys.readouterr()
    assert ingest(["show", str(folder / "mixed.pdf"), *url]) == 0
    shown = capsys.readouterr().out
    assert "indexed at version 1" in shown
    assert "note: 1 page without a text layer not read: INGEST_OCR=off" in shown
    assert ingest(["show", str(folder / "mixed.pdf"), "--json", *url]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == ["1 page without a text layer not read: INGEST_OCR=off"]
