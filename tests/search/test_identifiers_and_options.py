"""Issue 46's query defects (migration …_identifiers_options_and_stable_order.sql), each
observed on the schema before it and fixed at head, through search_documents:

1. A qualified name was one word to PostgreSQL's parser: the bare name did not find the page
   that writes it only qualified (`LambdaType` and `types.LambdaType`).
2. An option read as an exclusion: `--help-xoptions` and `-X` excluded their own pages.
3. The first results changed with p_limit: a deeper candidate of a larger limit took first
   place."""

from __future__ import annotations

from pathlib import Path

import psycopg

from ingestion_pipeline.db.connection import connect
from tests.old_enqueue import index_files

QUERY = "select source_name from search_documents(%s, null, 'lexical', %s)"


def index(url: str, folder: Path, pages: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in pages.items():
        (folder / name).write_text(text)
    _, drained = index_files(url, [folder])
    assert drained.counts["failed"] == 0, drained.counts


def names(conn: psycopg.Connection, text: str, limit: int = 10) -> list[str]:
    return [row["source_name"] for row in conn.execute(QUERY, (text, limit))]


PAGES = {
    "types.md": "# Dynamic types\n\nThe types.LambdaType object is the type of lambda functions.\n",
    "barrier.md": "# Synchronization\n\nCall asyncio.Barrier.wait() to wait for the others; sqlalchemy::orm too.\n",
    "options.md": "# Command line\n\nThe --help-xoptions flag lists the -X options of the interpreter.\n",
    "other.md": "# Other things\n\nNothing of the kind: a lambda expression, a barrier of wood, some help.\n",
}


def test_a_bare_name_finds_the_page_that_writes_it_qualified(search_words_schema, tmp_path):
    index(search_words_schema.url, tmp_path / "pages", PAGES)
    with connect(search_words_schema.url) as conn:
        qualified = [names(conn, q) for q in ("types.LambdaType", "asyncio.Barrier.wait")]
        bare = [names(conn, q) for q in ("LambdaType", "Barrier.wait", "orm")]
    assert qualified == [["types.md"], ["barrier.md"]]  # as written: both schemas
    if not search_words_schema.hardened:
        assert bare[:2] == [[], []]  # the bug: the name is inside one host-like word
        return  # (`::` the parser split already: `orm` found its page before)
    assert [hits[:1] for hits in bare] == [["types.md"], ["barrier.md"], ["barrier.md"]]  # first


def test_an_option_is_searched_not_excluded(search_words_schema, tmp_path):
    index(search_words_schema.url, tmp_path / "pages", PAGES)
    with connect(search_words_schema.url) as conn:
        found = [names(conn, q) for q in ("--help-xoptions", "-X options", "interpreter -X")]
        excluding = names(conn, "help -lambda")
    assert "options.md" in excluding and "other.md" not in excluding  # `-word` still excludes
    if not search_words_schema.hardened:
        assert found[0] == [] and "options.md" not in found[2]  # the bug: the option excluded its page
        return
    assert [hits[0] for hits in found] == ["options.md"] * 3


def layered_pages() -> dict[str, str]:
    """Step 1 seeds with `alpha` alone (`beta` has more postings than its budget of 1,000) and
    scores each seed chunk: 55 pages with `alpha` in their title come first (a title doubles a
    term's weight there); 5 pages with `alpha` in a chunk of its own, and `beta` (rare by
    documents) in 200 other chunks each, come next, and score best over all their chunks."""
    pages = {f"a{n:02}.md": f"# Alpha notes {n}\n\nPlain words of page {n}.\n" for n in range(55)}
    for n in range(5):
        parts = "".join(f"## Part {k}\n\nThe beta of part {k} crossed the plain.\n\n" for k in range(200))
        pages[f"b{n}.md"] = f"# Guide {n}\n\nOne alpha here.\n\n{parts}"
    pages |= {f"g{n:03}.md": f"# Gamma {n}\n\nOther words of page {n}.\n" for n in range(100)}
    return pages


def test_the_first_results_do_not_depend_on_the_limit(search_words_schema, tmp_path):
    index(search_words_schema.url, tmp_path / "pages", layered_pages())
    with connect(search_words_schema.url) as conn:
        by_limit = {limit: names(conn, "alpha beta", limit) for limit in (10, 50, 100)}
    assert sorted(by_limit[100]) == sorted(name for name in layered_pages() if name[0] in "ab")  # all 60
    if not search_words_schema.hardened:
        assert by_limit[100][:10] != by_limit[10]  # the bug: deeper candidates of limit 100 came first
        return
    assert by_limit[100][:10] == by_limit[10] and by_limit[100][:50] == by_limit[50]
