"""PPTX (python-pptx): each slide a page and a section headed by its title ("Slide N"
without one): the text of its shapes in order (groups included), tables as Markdown table
text, then the speaker notes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from pptx import Presentation

from .document import DraftSection, assemble, join_blocks
from .model import ParsedDocument
from .packages import PPTX
from .tables import markdown_table


def parse_pptx(stream: IO[bytes]) -> ParsedDocument:
    presentation = Presentation(stream)
    pages: list[str] = []
    drafts: list[DraftSection] = []
    for index, slide in enumerate(presentation.slides):
        title_shape = slide.shapes.title
        heading = title_shape.text_frame.text.strip() if title_shape is not None else ""
        title_id = title_shape.shape_id if title_shape is not None else None
        # Each access makes a new proxy object: the title shape is told apart by its id.
        blocks = [_shape_text(shape) for shape in _shapes(slide.shapes) if shape.shape_id != title_id]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            blocks.append(slide.notes_slide.notes_text_frame.text)
        text = join_blocks([(block, False) for block in blocks if block])
        pages.append("\n\n".join(part for part in (heading, text) if part))
        drafts.append(DraftSection(heading or f"Slide {index + 1}", 1, index, pages[-1]))
    title = (presentation.core_properties.title or "").strip() or None
    first = next((draft.heading for draft in drafts if not draft.heading.startswith("Slide ")), None)  # type: ignore[union-attr]
    return assemble(PPTX, pages, drafts, title=title or first, title_from_first_line=False)


def _shapes(shapes: Any) -> Iterator[Any]:
    for shape in shapes:
        if hasattr(shape, "shapes"):  # a group
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _shape_text(shape: Any) -> str:
    if getattr(shape, "has_table", False):
        return markdown_table([cell.text for cell in row.cells] for row in shape.table.rows)
    if getattr(shape, "has_text_frame", False):
        return str(shape.text_frame.text).strip()
    return ""
