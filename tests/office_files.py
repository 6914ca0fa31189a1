"""Office files made by the libraries that write them (python-docx, openpyxl, python-pptx),
in the test: nothing binary is committed."""

from __future__ import annotations

import io

from docx import Document
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches


def docx_bytes() -> bytes:
    document = Document()
    document.core_properties.title = "Backup handbook"
    document.add_heading("Continuous archiving", level=1)
    document.add_paragraph("The archiver copies every finished WAL segment to the vault before it is recycled.")
    document.add_heading("Recovery targets", level=2)
    document.add_paragraph("A recovery stops at the named restore point marked saffron-heron by the operator.")
    document.add_paragraph("Check the timeline first", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for row, values in zip(
        table.rows, [("Setting", "Value"), ("archive_timeout", "60s"), ("wal_level", "replica")], strict=True
    ):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    return _saved(document)


def xlsx_bytes() -> bytes:
    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Prices"
    sheet.append(["Plan", "Monthly price", "Seats"])
    sheet.append(["Premium", 25, 10])
    sheet.append(["Basic", 10, 3])
    second = workbook.create_sheet("Regions")
    second.append(["Region", "Datacenter"])
    second.append(["Europe", "marigold-falls"])
    stream = io.BytesIO()
    workbook.save(stream)
    return stream.getvalue()


def pptx_bytes() -> bytes:
    presentation = Presentation()
    layout = presentation.slide_layouts[1]  # title and content
    for title, body in (
        ("Quarterly review", "Revenue grew in every region."),
        ("Roadmap", "The lighthouse-cobalt migration ships in spring."),
    ):
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = body
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
    slide.shapes.title.text = "Figures"
    shape = slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1))
    for (r, c), value in {(0, 0): "Metric", (0, 1): "Value", (1, 0): "Churn", (1, 1): "2%"}.items():
        shape.table.cell(r, c).text = value
    slide.notes_slide.notes_text_frame.text = "Mention the churn target."
    return _saved(presentation)


def _saved(document) -> bytes:
    stream = io.BytesIO()
    document.save(stream)
    return stream.getvalue()
