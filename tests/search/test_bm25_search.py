"""BM25 lexical search (migration …_bm25_search.sql; docs/search.md, "Lexical search").

The failure classes it rules out, each observed on the schema before it (`bm25_schema`):
the ranking changed with the planner's statistics (term weights came from
pg_class.reltuples, so an ANALYZE, or its absence, reordered hits); one collection's
documents changed the scores of a search of another; a query of a common word read every
chunk that has it. At head only: identifiers match as written, ties are ordered by source
key, and the term counts equal the committed generations through new versions, deletes
and compactions racing commits."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from tests.helpers import Background, wait_until_blocked
from tests.old_enqueue import index_files
from tests.plans import captured_plans, nodes

QUERY = "select source_name, round(score::numeric, 9) as score from search_documents(%s, %s, 'lexical', 10)"


def write_pages(folder: Path, pages: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (folder / name).write_text(text)
    return folder


def index(url: str, folder: Path, collection: str = "default") -> None:
    """Enqueue and drain the folder, on the schema before the migration too."""
    _, drained = index_files(url, [folder], collection=collection)
    assert drained.counts["failed"] == 0


def ranking(conn: psycopg.Connection, text: str, collections: list[str] | None = None) -> list[tuple[str, float]]:
    return [(row["source_name"], float(row["score"])) for row in conn.execute(QUERY, (text, collections))]


TOPICS = ["replication", "checkpoint", "vacuum", "index", "backup", "locking", "planner", "archive"]


def topic_pages(prefix: str, count: int) -> dict[str, str]:
    """Pages that share words unevenly, so that term weights matter to the order."""
    pages = {}
    for n in range(count):
        words = " ".join(TOPICS[(n + k) % len(TOPICS)] for k in range(1 + n % 4))
        pages[f"{prefix}{n:03}.md"] = f"# {prefix} page {n}\n\nThis page covers {words} and the server.\n"
    return pages


def test_ranking_ignores_the_planners_statistics(bm25_schema, tmp_path):
    index(bm25_schema.url, write_pages(tmp_path / "pages", topic_pages("p", 40)))
    with connect(bm25_schema.url) as conn:
        conn.execute("analyze document_chunks")
        fresh = ranking(conn, "replication checkpoint vacuum")
        # Statistics gone stale (a big load autovacuum has not analyzed yet), forced.
        conn.execute("update pg_class set reltuples = reltuples * 1000 where oid = 'document_chunks'::regclass")
        stale = ranking(conn, "replication checkpoint vacuum")
    assert fresh
    if not bm25_schema.hardened:
        assert stale != fresh  # the bug: term weights came from the planner's row estimate
        return
    assert stale == fresh


def test_one_collections_documents_do_not_change_anothers_scores(bm25_schema, tmp_path):
    index(bm25_schema.url, write_pages(tmp_path / "b", topic_pages("b", 20)), collection="b")
    with connect(bm25_schema.url) as conn:
        conn.execute("analyze document_chunks")
        alone = ranking(conn, "replication vacuum", ["b"])
    # Another tenant's 60 documents, all about replication.
    others = {f"a{n:03}.md": f"# a {n}\n\nreplication replication {n}\n" for n in range(60)}
    index(bm25_schema.url, write_pages(tmp_path / "a", others), collection="a")
    with connect(bm25_schema.url) as conn:
        conn.execute("analyze document_chunks")
        beside = ranking(conn, "replication vacuum", ["b"])
    assert alone and {name for name, _ in beside} <= {f"b{n:03}.md" for n in range(20)}
    if not bm25_schema.hardened:
        assert beside != alone  # the bug: weights counted every collection's chunks
        return
    assert beside == alone


def chunk_rows_read(plans: list[dict]) -> int:
    """Rows that scans of document_chunks returned, over all their loops."""
    return sum(
        int(node.get("Actual Rows", 0)) * int(node.get("Actual Loops", 1))
        for plan in plans
        for node in nodes(plan)
        if node.get("Relation Name") == "document_chunks"
    )


# 1,200 chunks with the words, more than the 1,000 chunk postings the head's first step may
# read: two chunks in each of 600 documents (half the documents to drain of one each).
COMMON_DOCUMENTS = 600
CHUNKS_PER_DOCUMENT = 2


def common_page(n: int) -> str:
    """Two paragraphs of ~900 characters, each with the words: two chunks of 1,200 at most."""
    filler = " ".join(f"filler{n}x{k}" for k in range(80))
    return "".join(f"The common thread of note {n}, part {part}. {filler}.\n\n" for part in (1, 2))


def test_a_common_word_reads_a_bounded_number_of_chunks(bm25_schema, tmp_path):
    pages = {f"c{n:04}.md": f"# Note {n}\n\n{common_page(n)}" for n in range(COMMON_DOCUMENTS)}
    index(bm25_schema.url, write_pages(tmp_path / "common", pages))
    with connect(bm25_schema.url) as conn:
        counted = conn.execute(
            "select min(w) as fewest, max(w) as most, max(n) as per_document from (select count(*) as n,"
            " count(*) filter (where content like '%common thread%') as w from document_chunks group by document_id) c"
        ).fetchone()
    with connect(bm25_schema.url) as conn, captured_plans(conn) as plans:
        conn.execute("select set_config('auto_explain.log_analyze', 'on', false)")
        conn.execute("select set_config('auto_explain.log_timing', 'off', false)")
        hits = conn.execute("select * from search_documents('common thread', null, 'lexical', 10)").fetchall()
        read = chunk_rows_read(plans)
    assert counted["fewest"] == counted["most"] == CHUNKS_PER_DOCUMENT
    assert len(hits) == 10
    if not bm25_schema.hardened:
        assert read >= COMMON_DOCUMENTS * CHUNKS_PER_DOCUMENT  # the bug: every chunk with the words is scored
        return
    # Step 1 reads at most 1,000 postings; step 2 the chunks of the best 50 documents.
    assert read <= 1000 + 50 * counted["per_document"], read


def test_identifiers_match_as_written(db_url, tmp_path):
    pages = {
        "bool_or.md": "# Aggregates\n\nbool_or returns true if any input is true.\n",
        "bool.md": "# Booleans\n\nA bool is true or false; bool values, bool columns, bool casts.\n",
        "pg_am.md": "# Catalogs\n\nThe catalog pg_am stores access methods.\n",
        "pg.md": "# Tools\n\npg tools: pg this, pg that, pg everything.\n",
    }
    index(db_url, write_pages(tmp_path / "ids", pages))
    with connect(db_url) as conn:
        assert [name for name, _ in ranking(conn, "bool_or")] == ["bool_or.md"]
        assert [name for name, _ in ranking(conn, "pg_am")] == ["pg_am.md"]
        assert ranking(conn, "bool")[0][0] == "bool.md"  # the parts are still words


def test_ties_are_ordered_by_source_key(db_url, tmp_path):
    text = "# Same\n\nIdentical pages rank the same.\n"
    index(db_url, write_pages(tmp_path / "ties", {f"{n}.md": text + f"\nMarker {n * 3}.\n" for n in "dbca"}))
    with connect(db_url) as conn:
        first = conn.execute("select source_uri, score from search_documents('identical', null)").fetchall()
        again = conn.execute("select source_uri, score from search_documents('identical', null)").fetchall()
    assert first == again and len({row["score"] for row in first}) == 1
    assert [row["source_uri"] for row in first] == sorted(row["source_uri"] for row in first)


def drift(conn: psycopg.Connection) -> list[dict]:
    return conn.execute("select * from search_term_count_drift()").fetchall()


def test_term_counts_follow_versions_and_deletes(db_url, tmp_path, capsys):
    folder = write_pages(tmp_path / "docs", {"a.md": "# A\n\nalpha beta\n", "b.md": "# B\n\nbeta gamma\n"})
    index(db_url, folder)
    with connect(db_url) as conn:
        assert drift(conn) == []
        assert [name for name, _ in ranking(conn, "alpha")] == ["a.md"]
    (folder / "a.md").write_text("# A\n\ndelta beta\n")  # a new version: alpha leaves, delta comes
    index(db_url, folder)
    with connect(db_url) as conn:
        assert drift(conn) == []
        assert ranking(conn, "alpha") == [] and [name for name, _ in ranking(conn, "delta")] == ["a.md"]
        counts = conn.execute(
            "select lexeme, sum(documents)::int as documents from search_term_counts"
            " where lexeme in ('', 'alpha', 'beta', 'delta') group by lexeme order by lexeme"
        ).fetchall()
        assert {row["lexeme"]: row["documents"] for row in counts} == {"": 2, "alpha": 0, "beta": 2, "delta": 1}
    assert ingest(["delete", str(folder / "b.md"), "--database-url", db_url]) == 0
    with connect(db_url) as conn:
        assert drift(conn) == [] and ranking(conn, "gamma") == []
        capsys.readouterr()
        assert ingest(["janitor", "--json", "--database-url", db_url]) == 0  # its last pass folds them
        folded = json.loads(capsys.readouterr().out)["search_terms"]
        assert folded["removed"] > folded["written"] > 0 and folded["passes"] == 1
        left = conn.execute("select count(*) as n from search_term_counts group by collection, lexeme").fetchall()
        assert {row["n"] for row in left} == {1}  # one row per lexeme, none at zero
        assert drift(conn) == []


def test_compaction_races_a_commit_and_another_compaction(db_url, tmp_path):
    """A commit's delta rows inserted but not committed while a compaction runs; a second
    compaction blocked on the first's rows: the counts stay exact either way."""
    folder = write_pages(tmp_path / "docs", {f"d{n}.md": f"# D{n}\n\nshared word {n}\n" for n in range(5)})
    index(db_url, folder)
    with connect(db_url) as writer, connect(db_url) as first, connect(db_url) as second, connect(db_url) as observer:
        writer.execute("begin")
        # What a commit's trigger does: the deltas of a document (here: counted twice over).
        writer.execute(
            "insert into search_term_counts (collection, lexeme, documents, chunks)"
            " select collection, lexeme, sum(documents), sum(chunks) from search_term_counts"
            " where lexeme = 'share' group by 1, 2"
        )
        first.execute("begin")
        first.execute("select compact_search_term_counts()")  # does not see the writer's rows
        racing = Background(lambda: second.execute("select compact_search_term_counts() as c").fetchone()["c"])
        wait_until_blocked(observer, second.info.backend_pid, by=first.info.backend_pid)
        first.execute("commit")
        racing.join()
        writer.execute("rollback")
        assert drift(observer) == []
        writer.execute("begin")
        writer.execute(
            "insert into search_term_counts (collection, lexeme, documents, chunks)"
            " select collection, lexeme, sum(documents), sum(chunks) from search_term_counts"
            " where lexeme = 'share' group by 1, 2"
        )
        observer.execute("select compact_search_term_counts()")
        writer.execute("commit")
        shared = observer.execute(
            "select sum(documents)::int as n from search_term_counts where lexeme = 'share'"
        ).fetchone()["n"]
        assert shared == 10  # both counts: the compaction neither lost nor doubled the writer's rows
    assert racing.result["removed"] == 0  # the first compaction had folded them all


@pytest.mark.parametrize("query", ["the", "only all"])
def test_stop_word_queries_are_answered_from_headings(db_url, tmp_path, query):
    pages = {"all.md": "# ALL and ONLY\n\nQualifiers of subqueries.\n", "x.md": "# Other\n\nNothing here.\n"}
    index(db_url, write_pages(tmp_path / "stop", pages))
    with connect(db_url) as conn:
        found = [name for name, _ in ranking(conn, query)]
    assert found == (["all.md"] if query == "only all" else [])
