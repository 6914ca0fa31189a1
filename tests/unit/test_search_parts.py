"""Heading paths, the pure part of search in Python (the query's terms and the fusion are
the search RPC's: tests/search/test_search_sql_parts.py)."""

from ingestion_pipeline.processing import Section, heading_paths


def section(ordinal, heading, level):
    return Section(ordinal=ordinal, heading=heading, level=level, page_ordinal=None, text="text")


def test_heading_paths_follow_the_outline():
    sections = [
        section(0, None, 1),
        section(1, "Backup", 1),
        section(2, "Dumps", 2),
        section(3, "Options", 3),
        section(4, "Archiving", 2),
        section(5, None, 1),
        section(6, "Restore", 1),
    ]
    assert heading_paths(sections) == {
        0: None,
        1: "Backup",
        2: "Backup › Dumps",
        3: "Backup › Dumps › Options",
        4: "Backup › Archiving",
        5: "Backup › Archiving",
        6: "Restore",
    }
