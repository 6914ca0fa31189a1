"""Lexical search on a real database: title and headings weigh above body text, a page that
misses one word of the query still ranks, phrases and -words keep working, one hit per page,
committed generations only; `ingest reindex` rebuilds documents written before the weights."""

from __future__ import annotations

import json

import pytest

from ingestion_pipeline import cli
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.search import search
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from tests.conftest import _fresh_database
from tests.old_enqueue import index_files

WEIGHTED_SEARCH = "weighted_search"


def page(title: str, *sections: tuple[str, str]) -> str:
    body = "".join(f"<h2>{heading}</h2><p>{text}</p>" for heading, text in sections)
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"


FILLER = (
    "The server keeps its configuration in one file and reads it again on a reload signal. "
    "Settings changed this way apply to new sessions; others need a restart of the server. "
)

PAGES = {
    "vacuum.html": page(
        "VACUUM",
        ("Description", "Reclaims storage occupied by dead tuples. " + FILLER),
        ("Parameters", "FULL rewrites the whole table into a new file. " + FILLER),
    ),
    # Says "vacuum" many more times than the VACUUM page, in body text only.
    "storage.html": page(
        "CREATE TABLE storage parameters",
        (
            "Per-table settings",
            "autovacuum_enabled, vacuum_truncate, autovacuum_vacuum_threshold: vacuum "
            "vacuum vacuum vacuum vacuum. The vacuum settings override the vacuum defaults. " + FILLER,
        ),
    ),
    # The answer to "password file for client connections": the words are spread over sections.
    "pgpass.html": page(
        "The password file",
        ("Location", "The file .pgpass in the home directory holds passwords. " + FILLER),
        ("Use by clients", "Client programs read it when a connection needs a password. " + FILLER),
    ),
    "auth.html": page("Authentication methods", ("Password", "The server may ask a password. " + FILLER)),
    # A long page that mentions everything: it may appear once, never ten times.
    "long.html": page(
        "Reference", *[(f"Part {i}", "vacuum password file client connection. " + FILLER * 3) for i in range(30)]
    ),
}


@pytest.fixture
def indexed(db_url, tmp_path) -> str:
    folder = tmp_path / "pages"
    folder.mkdir()
    for name, html in PAGES.items():
        (folder / name).write_text(html)
    _, drained = index_files(db_url, [folder])
    assert drained.counts["completed"] == len(PAGES)
    return db_url


def names(conn, text: str, limit: int = 10) -> list[str]:
    return [hit.source_name for hit in search(conn, text, limit=limit)]


def test_title_outranks_a_page_that_repeats_the_word_in_its_body(indexed, conn):
    assert names(conn, "vacuum")[0] == "vacuum.html"


def test_a_page_missing_a_word_still_ranks_by_what_it_covers(indexed, conn):
    # "connections" is nowhere but in the long page, which has every word in every part
    # (the AND of websearch_to_tsquery found only it): the page about the password file,
    # with "password" and "file" in its title, still comes first.
    assert names(conn, "password file for client connections")[0] == "pgpass.html"
    assert names(conn, "password file")[0] == "pgpass.html"


def test_one_hit_per_page(indexed, conn):
    found = names(conn, "vacuum password file client connection server", limit=10)
    assert len(found) == len(set(found)) == len(PAGES)


def test_phrases_and_excluded_words(indexed, conn):
    assert names(conn, '"dead tuples"') == ["vacuum.html"]
    assert "storage.html" not in names(conn, "vacuum -autovacuum_enabled")
    assert "vacuum.html" in names(conn, "vacuum -autovacuum_enabled")
    # a query of nothing but exclusions is searched as its words (issue 46: `-X`, `--help`)
    assert names(conn, "-vacuum") == names(conn, "vacuum") != []


def test_stop_words_only_find_the_titles_and_headings_that_have_them(indexed, conn):
    # English drops "the", "by" and "and" from text; titles and headings keep them.
    assert names(conn, "the of and") == ["pgpass.html"]  # "The password file"
    assert names(conn, "by") == ["pgpass.html"]  # its heading "Use by clients"
    assert names(conn, "only") == []


def test_unknown_words_find_nothing(indexed, conn):
    assert names(conn, "xylophone") == []


def test_empty_query_and_unknown_mode_are_clear_errors(indexed, conn, monkeypatch):
    with pytest.raises(IngestError, match="empty"):
        search(conn, "   ")
    with pytest.raises(IngestError, match="unknown search mode"):
        search(conn, "vacuum", mode="fuzzy")
    monkeypatch.setenv("INGEST_EMBEDDER", "none")  # a vector search without a query embedder
    with pytest.raises(IngestError, match="this query's embedder is none: set INGEST_EMBEDDER"):
        search(conn, "vacuum", mode="vector")


def test_hits_carry_title_heading_and_snippet(indexed, conn):
    hit = search(conn, '"dead tuples"')[0]
    assert (hit.title, hit.heading) == ("VACUUM", "Description")
    assert "[dead] [tuples]" in hit.snippet


def test_cli_search_json(indexed, capsys):
    assert cli.main(["search", "vacuum", "--json", "--limit", "2", "--database-url", indexed]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["source_name"] == "vacuum.html" and len(hits) == 2
    assert set(hits[0]) == {
        "document_id",
        "title",
        "source_name",
        "source_uri",
        "heading",
        "chunk_ordinal",
        "score",
        "snippet",
        "collection",
        "heading_path",
        "page",
        "page_label",
    }


@pytest.fixture
def pre_weights_url(pg_server, template_before) -> str:
    yield from _fresh_database(pg_server, template_before(WEIGHTED_SEARCH))


def test_reindex_brings_documents_indexed_before_the_weights_to_them(pre_weights_url, tmp_path, capsys):
    folder = tmp_path / "pages"
    folder.mkdir()
    for name in ("vacuum.html", "storage.html"):
        (folder / name).write_text(PAGES[name])
    # the older schema's chunks, built as that release's worker did (tests/any_schema_rpc.py)
    _, drained = index_files(pre_weights_url, [folder])
    assert drained.counts["completed"] == 2
    migrator.migrate(pre_weights_url)
    settings = load_settings(database_url=pre_weights_url)
    with make_pool(pre_weights_url, settings) as pool, pool.connection() as conn:
        unweighted = conn.execute("select count(*) as n from committed_document_chunks where title is null").fetchone()
        assert unweighted["n"] > 0
        # Without the weights the title's "VACUUM" is body text: it adds nothing to the page's
        # score. Compared as the lead over the other page, which a change of the term's IDF
        # (the reindex makes other chunks) does not move: a one-word query's scores all scale with it.
        unweighted = {hit.source_name: hit.score for hit in search(conn, "vacuum")}
        unweighted_lead = unweighted["vacuum.html"] / unweighted["storage.html"]

        capsys.readouterr()
        assert cli.main(["reindex", "--all", "--json", "--database-url", pre_weights_url]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["counts"] == {"reindex_queued": 2}
        assert names(conn, "vacuum")  # still searchable while the reindex is queued
        assert Worker(pool, settings).run(drain=True).counts["completed"] == 2
        left = conn.execute("select count(*) as n from committed_document_chunks where title is null").fetchone()
        assert left["n"] == 0
        hits = search(conn, "vacuum")
        weighted = {hit.source_name: hit.score for hit in hits}
        assert hits[0].source_name == "vacuum.html"
        assert weighted["vacuum.html"] / weighted["storage.html"] > unweighted_lead


def test_reindex_usage_and_nothing_to_do(db_url, capsys):
    assert cli.main(["reindex", "--database-url", db_url]) == 2
    assert "give documents (keys, paths or ids), --all or --embeddings" in capsys.readouterr().err
    assert cli.main(["reindex", "--all", "--database-url", db_url]) == 1
    assert "nothing to reindex" in capsys.readouterr().out
    assert cli.main(["reindex", "00000000-0000-0000-0000-000000000001", "--json", "--database-url", db_url]) == 1
    assert json.loads(capsys.readouterr().out)["counts"] == {"not_found": 1}
