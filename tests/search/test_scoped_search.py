"""The fourth review's search defects (issue 44: 1, 2, 4, 6; migration …_scoped_search.sql),
each observed on the schema before the migration and fixed at head, through the search RPC
as PostgREST runs a request (`set local role`, the JWT claims for the transaction).

1. Another tenant's chunks spent a reader's candidate budget: the reader's own hit vanished.
2. Queries had no length or term cap.
4. App roles held SELECT (id) on documents: EXPLAIN ANALYZE counted every tenant's hidden
   documents.
6. readable_documents read every tenant's documents for one row."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import psycopg
import pytest

from ingestion_pipeline.db.connection import connect
from tests.old_enqueue import index_files
from tests.reads import rows_read

ALICE = UUID("00000000-0000-4000-8000-00000000a11c")
CROWD = 1234  # chunks of the private collection with the reader's word: more than the budget (1,000)


def as_alice(conn: psycopg.Connection) -> None:
    conn.execute("select set_config('role', 'authenticated', true)")
    conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps({"sub": str(ALICE)}),))


def as_anon(conn: psycopg.Connection) -> None:
    conn.execute("select set_config('role', 'anon', true)")


def index(url: str, folder: Path, files: dict[str, str], collection: str) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    _, drained = index_files(url, [folder], collection=collection)
    assert drained.counts["failed"] == 0, drained.counts


def sections(word: str, count: int) -> str:
    """A page of `count` sections, each a chunk of its own that has `word`."""
    return "".join(f"## Part {n}\n\nThe {word} of part {n} crossed the plain.\n\n" for n in range(count))


def test_another_tenants_chunks_do_not_crowd_out_a_readers_hit(scoped_search_schema, tmp_path):
    url = scoped_search_schema.url
    # Stored first: a private collection whose one document has the word in 1,234 chunks.
    index(url, tmp_path / "vault", {"herd.md": "# Herd\n\n" + sections("zebra", CROWD)}, "vault")
    index(url, tmp_path / "mine", {"note.md": "# Note\n\nOne zebra grazes by the river.\n"}, "mine")
    with connect(url) as conn:
        conn.execute("select grant_collection('mine', %s)", (ALICE,))
        assert (
            conn.execute("select chunk_count from documents where collection = 'vault'").fetchone()["chunk_count"]
            >= CROWD
        )
        with conn.transaction():
            as_alice(conn)
            hits = conn.execute("select collection from search_documents('zebra', null, 'lexical', 10)").fetchall()
    if not scoped_search_schema.hardened:
        assert hits == []  # the bug: the budget went to the vault's chunks, alice's hit vanished
        return
    assert [hit["collection"] for hit in hits] == ["mine"]


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("zebra " * 17_000, "at most 4096"),  # 100 KB
        (" ".join(f"w{n}" for n in range(10_000)), "at most 4096"),  # 10,000 terms
        (" ".join(f"w{n}" for n in range(65)), "more than 64 distinct terms"),
    ],
    ids=["100KB", "10000_terms", "65_terms"],
)
def test_long_queries_are_refused_for_anon(scoped_search_schema, query, reason):
    with connect(scoped_search_schema.url) as conn, conn.transaction():
        as_anon(conn)
        if not scoped_search_schema.hardened:
            conn.execute("select * from search_documents(%s)", (query,)).fetchall()  # the bug: taken as asked
            return
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=reason):
            conn.execute("select * from search_documents(%s)", (query,)).fetchall()


def test_case_variants_of_a_word_are_one_term(scoped_search_schema, tmp_path):
    """500 spellings of one word are one term (under the caps) and highlight as the word does."""
    url = scoped_search_schema.url
    index(url, tmp_path / "open", {"z.md": "# Zebras\n\nA zebra grazes by the river at dawn.\n"}, "open")
    variants = " ".join("".join(c.upper() if n >> i & 1 else c for i, c in enumerate("zebra")) for n in range(500))
    with connect(url) as conn:
        conn.execute("select add_collection('open', true)")
        with conn.transaction():
            as_anon(conn)
            plain = conn.execute("select snippet, score from search_documents('zebra')").fetchall()
            varied = conn.execute("select snippet, score from search_documents(%s)", (variants,)).fetchall()
    assert plain
    if not scoped_search_schema.hardened:
        # the bug: the highlight's tsquery held every spelling (999 nodes), and ts_headline
        # picked another fragment than for the word
        assert varied != plain
        return
    assert varied == plain


def test_app_roles_have_a_statement_timeout(db_url):
    with connect(db_url) as conn:
        settings = {
            row["rolname"]: row["config"]
            for row in conn.execute(
                """select r.rolname, s.setconfig as config
                     from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
                    where r.rolname in ('anon', 'authenticated') and s.setdatabase = 0"""
            )
        }
    for role in ("anon", "authenticated"):
        assert any(item.startswith("statement_timeout=") for item in settings.get(role, [])), settings


def test_explain_tells_an_app_role_nothing_of_hidden_documents(scoped_search_schema, tmp_path):
    url = scoped_search_schema.url
    hidden = {f"h{n}.md": f"# Hidden {n}\n\nA private page {n}.\n" for n in range(7)}
    index(url, tmp_path / "vault", hidden, "vault")
    with connect(url) as conn, conn.transaction():
        as_anon(conn)
        statement = "explain (analyze, costs off, timing off, summary off) select id from documents"
        if not scoped_search_schema.hardened:
            plan = "\n".join(row["QUERY PLAN"] for row in conn.execute(statement))
            assert "Rows Removed by Filter: 7" in plan, plan  # the bug: every hidden document counted
            return
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)


def test_readable_documents_reads_the_callers_rows_only(scoped_search_schema, tmp_path):
    url = scoped_search_schema.url
    index(url, tmp_path / "open", {"welcome.md": "# Welcome\n\nOpen to all.\n"}, "open")
    others = {f"p{n}.md": f"# Private {n}\n\nPage {n}.\n" for n in range(300)}
    index(url, tmp_path / "vault", others, "vault")
    with connect(url) as conn:
        conn.execute("select add_collection('open', true)")
        conn.execute("analyze documents")
        with conn.transaction():
            before = rows_read(conn)
            as_anon(conn)
            listed = conn.execute("select source_name from readable_documents()").fetchall()
            conn.execute("reset role")
            read = rows_read(conn, since=before).get("documents", 0)
    assert [row["source_name"] for row in listed] == ["welcome.md"]
    if not scoped_search_schema.hardened:
        assert read > 300, read  # the bug: every tenant's documents read for one row
        return
    assert read == 1, read


def test_readable_documents_pages(db_url, tmp_path):
    index(db_url, tmp_path / "open", {f"d{n:02}.md": f"# D {n}\n\nText {n}.\n" for n in range(25)}, "open")
    with connect(db_url) as conn:
        conn.execute("select add_collection('open', true)")
        pages: list[list[str]] = []
        after: dict = {"collection": None, "uri": None, "id": None}
        with conn.transaction():
            as_anon(conn)
            while True:
                rows = conn.execute(
                    "select * from readable_documents(null, 10, %s, %s, %s)",
                    (after["collection"], after["uri"], after["id"]),
                ).fetchall()
                if not rows:
                    break
                pages.append([row["source_name"] for row in rows])
                last = rows[-1]
                after = {"collection": last["collection"], "uri": last["source_uri"], "id": last["document_id"]}
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute("select * from readable_documents(null, 1001)")
    assert [len(page) for page in pages] == [10, 10, 5]
    assert [name for page in pages for name in page] == [f"d{n:02}.md" for n in range(25)]
