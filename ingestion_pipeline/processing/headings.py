"""Each section's heading path ("Backups › Continuous archiving › Recovery"): what a chunk
is about, stored with the chunk so search can weigh headings above body text."""

from __future__ import annotations

from .model import Section

SEPARATOR = " › "


def heading_paths(sections: list[Section]) -> dict[int, str | None]:
    """Section ordinal -> the headings above it and its own, outermost first; None for
    text before the first heading. A heading closes every open heading of its level or
    deeper, as in an outline."""
    open_headings: list[tuple[int, str]] = []  # (level, heading), outermost first
    paths: dict[int, str | None] = {}
    for section in sections:
        if section.heading:
            while open_headings and open_headings[-1][0] >= section.level:
                open_headings.pop()
            open_headings.append((section.level, section.heading))
        paths[section.ordinal] = SEPARATOR.join(h for _, h in open_headings) or None
    return paths
