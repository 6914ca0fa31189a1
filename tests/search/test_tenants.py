"""Collections as tenants (issue 33): two users, three collections (one public), and the
search RPC, the tables and the views as an app's requests reach them, the way PostgREST
runs a request (`set local role authenticated` and the JWT claims, for the transaction).

alpha: private, user ALICE reads it; beta: private, user BOB writes it; open: public.
Every collection has an otter page (a word all share); beta's also has a secret word.
The claims are taken as given (PostgREST verified the JWT): what is checked is that
nothing else widens what a request sees."""

from __future__ import annotations

import json
import re
from pathlib import Path
from uuid import UUID

import psycopg
import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect, make_pool
from ingestion_pipeline.errors import UnknownCollection
from ingestion_pipeline.search import Reader, search
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from tests.vector.corpus import EMBEDDER

ALICE = UUID("00000000-0000-4000-8000-00000000a11c")
BOB = UUID("00000000-0000-4000-8000-000000000b0b")
SECRET = "zanzibar"
CORPUS = {
    "alpha": {"otters.md": "# Alpha otters\n\nThe otter of alpha swims in the river with its whiskers.\n"},
    "beta": {
        "otters.md": f"# Beta otters\n\nThe otter of beta swims past {SECRET} harbour at dawn.\n",
        "plans.md": f"# Beta plans\n\nThe {SECRET} launch is in spring; the otter team knows.\n",
    },
    "open": {"otters.md": "# Open otters\n\nThe otter of the open collection swims in the lake.\n"},
}
VISIBLE = {  # who sees which collections
    "alice": {"alpha", "open"},
    "bob": {"beta", "open"},
    "anon": {"open"},
    "nobody": {"open"},  # authenticated, member of nothing
    "owner": {"alpha", "beta", "open"},
}
READERS = {"alice": Reader(ALICE), "bob": Reader(BOB), "anon": Reader(), "nobody": Reader(UUID(int=7)), "owner": None}
DOCUMENTS = sum(len(files) for files in CORPUS.values())


def run(*args: str) -> None:
    assert ingest(list(args)) == 0, args


@pytest.fixture
def tenants(db_url, tmp_path) -> str:
    """The three collections indexed (with vectors), the users granted, `open` public."""
    for collection, files in CORPUS.items():
        folder = tmp_path / collection
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        run("enqueue", str(folder), "--collection", collection, "--database-url", db_url)
    settings = load_settings(database_url=db_url, retry_backoff_seconds=0, parse_processes=0)
    with make_pool(db_url, settings) as pool:
        result = Worker(pool, settings, embedder=EMBEDDER).run(drain=True)
    assert result.counts.get("completed") == DOCUMENTS, result.counts
    with connect(db_url) as conn:
        conn.execute("select add_collection('open', true)")
        assert conn.execute("select grant_collection('alpha', %s)", (ALICE,)).fetchone()["grant_collection"]["ok"]
        assert conn.execute("select grant_collection('beta', %s, 'writer')", (BOB,)).fetchone()["grant_collection"][
            "ok"
        ]
    return db_url


def collections_of(hits) -> set[str]:
    return {hit.collection for hit in hits}


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_each_reader_finds_only_what_it_may_read(tenants, mode):
    with connect(tenants) as conn:
        for who, reader in READERS.items():
            hits = search(conn, "otter swims", mode=mode, limit=10, embedder=EMBEDDER, reader=reader)
            assert collections_of(hits) == VISIBLE[who], (who, mode, hits)
            assert all(SECRET not in hit.snippet for hit in hits if hit.collection != "beta"), hits
            # Naming a collection it may not read narrows to nothing, exactly as a collection
            # that does not exist does: no error, no hint. The owner, who reads every
            # collection, is told of one that does not exist (a typo).
            for named in (["beta"], ["no-such-collection"]):
                if reader is None and named == ["no-such-collection"]:
                    with pytest.raises(UnknownCollection):
                        search(conn, "otter", mode=mode, collections=named, embedder=EMBEDDER)
                    continue
                narrowed = search(conn, "otter", mode=mode, collections=named, embedder=EMBEDDER, reader=reader)
                assert collections_of(narrowed) == VISIBLE[who] & set(named), (who, named)


def test_the_cli_searches_as_a_user(tenants, capsys, monkeypatch):
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")  # the 64-dimension HashEmbedder the corpus has
    for who, flags in {"alice": ["--as-user", str(ALICE)], "anon": ["--as-anon"], "owner": []}.items():
        for mode in ("lexical", "vector", "hybrid"):
            capsys.readouterr()
            code = ingest(["search", "otter", "--json", "--mode", mode, *flags, "--database-url", tenants])
            out = capsys.readouterr()
            assert code == 0, out.err
            assert {hit["collection"] for hit in json.loads(out.out)} == VISIBLE[who], (who, mode)


def test_the_cli_refuses_a_user_id_that_is_not_a_uuid(tenants, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ingest(["search", "otter", "--as-user", "alice", "--database-url", tenants])
    assert exit_info.value.code == 2
    assert "not a user id" in capsys.readouterr().err


def as_reader(conn: psycopg.Connection, role: str, claims: dict | None) -> None:
    """What PostgREST does at the start of a request's transaction."""
    conn.execute("select set_config('role', %s, true)", (role,))
    if claims is not None:
        conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))


def alice(conn: psycopg.Connection) -> None:
    as_reader(conn, "authenticated", {"sub": str(ALICE), "role": "authenticated"})


def readable_collections_of(conn: psycopg.Connection) -> set[str]:
    return {r["collection"] for r in conn.execute("select collection from readable_documents()").fetchall()}


def test_sql_as_authenticated_sees_counts_and_rows_of_its_collections_only(tenants):
    with connect(tenants) as conn:
        owned = conn.execute("select id, collection from documents").fetchall()
        visible_ids = {row["id"] for row in owned if row["collection"] in VISIBLE["alice"]}
        committed = {  # each visible document's committed artifacts, as the owner counts them
            table: {
                doc: conn.execute(
                    f"select count(*) as n from {table} t join documents d on d.id = t.document_id "
                    "and d.index_generation_id = t.index_generation_id where t.document_id = %s",
                    (doc,),
                ).fetchone()["n"]
                for doc in (row["id"] for row in owned)
            }
            for table in ("document_pages", "document_sections", "document_chunks")
        }
        with conn.transaction():
            alice(conn)
            assert {r["document_id"] for r in conn.execute("select document_id from readable_documents()")} == (
                visible_ids
            )
            assert readable_collections_of(conn) == VISIBLE["alice"]
            for table, per_document in committed.items():
                for doc, n in per_document.items():
                    got = conn.execute(f"select count(*) as n from readable_{table}(%s)", (doc,)).fetchone()["n"]
                    assert got == (n if doc in visible_ids else 0), (table, doc)
                    assert doc not in visible_ids or n > 0
            rows = conn.execute("select collection, snippet from search_documents('otter swims')").fetchall()
            assert {r["collection"] for r in rows} == VISIBLE["alice"]
            assert conn.execute("select readable_collections() as r").fetchone()["r"] == sorted(VISIBLE["alice"])


def test_the_search_functions_scope_themselves_when_called_directly(tenants):
    """The two SECURITY DEFINER parts of the RPC are not granted to readers (the RPC calls
    them as its owner); granted by mistake, called directly with any collections named,
    they would still return nothing of beta: they scope themselves by the calling role."""
    with connect(tenants) as conn, conn.transaction():
        conn.execute("grant execute on function search_lexical_hits(text, text[], integer) to authenticated")
        conn.execute("grant execute on function search_vector_hits(real[], text[], integer, text) to authenticated")
        alice(conn)
        for named in (None, ["beta"], ["alpha", "beta"]):
            rows = conn.execute("select document_id from search_lexical_hits(%s, %s, 50)", (SECRET, named)).fetchall()
            assert rows == [], named
            vector = EMBEDDER.embed([f"{SECRET} launch"])[0]
            ids = [
                r["document_id"]
                for r in conn.execute(
                    "select document_id from search_vector_hits(%s::real[], %s, 50, 'hash')", (vector, named)
                ).fetchall()
            ]
            assert bool(ids) == (named != ["beta"]), named  # nearest: whatever alice may read
            readable = {r["document_id"] for r in conn.execute("select document_id from readable_documents()")}
            assert set(ids) <= readable, "every hit is a document alice can see"


def test_no_write_and_no_look_at_who_reads_what(tenants):
    statements = [
        "insert into documents (source_name, byte_size) values ('x', 1)",
        "update documents set title = 'mine'",
        "delete from document_chunks",
        "select * from document_chunks",
        "select * from document_sections",
        "select * from document_pages",
        "select * from committed_document_chunks",
        "select title from documents",
        "select id from documents",
        "explain analyze select 1 from documents where id = gen_random_uuid()",
        "select * from searchable_chunks",
        "select * from search_term_counts",
        "select * from search_lexical_hits('otter', null, 10)",
        "select * from search_vector_hits(array[1, 0]::real[], null, 10, 'hash')",
        "select count(*) from documents where collection = 'beta'",
        "explain analyze select 1 from documents where title ^@ 'Beta'",
        "select document_is_readable(gen_random_uuid())",
        "select * from collections",
        "select * from collection_members",
        "select * from document_sources",
        "select * from ingestion_jobs",
        "select add_collection('beta', true)",
        f"select grant_collection('beta', '{ALICE}')",
        "select search_scope(null)",
        "select request_user_id()",
    ]
    with connect(tenants) as conn:
        for role, claims in (("authenticated", {"sub": str(ALICE)}), ("anon", None)):
            for statement in statements:
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    as_reader(conn, role, claims)
                    conn.execute(statement)
        with conn.transaction():  # none of it happened
            assert conn.execute("select count(*) as n from collection_members").fetchone()["n"] == 2
            assert (
                conn.execute("select is_public from collections where name = 'beta'").fetchone()["is_public"] is False
            )


def test_forged_or_odd_claims_widen_nothing(tenants):
    cases = {
        "a service role claimed": ("authenticated", {"sub": str(ALICE), "role": "service_role"}, VISIBLE["alice"]),
        "a sub that is not a uuid": ("authenticated", {"sub": "alice"}, VISIBLE["nobody"]),
        "no claims at all": ("authenticated", None, VISIBLE["nobody"]),
        "anon with a user's sub": ("anon", {"sub": str(BOB), "role": "anon"}, VISIBLE["anon"]),
    }
    with connect(tenants) as conn:
        for case, (role, claims, visible) in cases.items():
            with conn.transaction():
                as_reader(conn, role, claims)
                found = readable_collections_of(conn)
                searched = {r["collection"] for r in conn.execute("select collection from search_documents('otter')")}
            assert found == searched == visible, case


def test_a_leaky_function_explain_and_debug_output_show_nothing_of_other_collections(tenants):
    """A reader's own function in a query sees only what the reader's functions returned
    (they are opaque to the planner: no filter of the reader's reaches their rows); EXPLAIN
    ANALYZE of the RPC and of a reader's function shows a function scan and the rows
    returned; a reader's debug_print_plan shows nothing of the plans inside them; claims
    that are not JSON make no error that a hidden row could trigger."""
    with connect(tenants) as conn:
        beta_ids = [r["id"] for r in conn.execute("select id from documents where collection = 'beta'").fetchall()]
        seen: list[str] = []
        conn.add_notice_handler(lambda diag: seen.append(diag.message_primary or ""))
        with conn.transaction():
            alice(conn)
            conn.execute(
                "create function pg_temp.peek(text) returns boolean language plpgsql cost 0.0000001 "
                "as $$ begin raise notice 'peek %', $1; return true; end $$"
            )
            conn.execute("select count(*) from readable_documents() where pg_temp.peek(title)").fetchone()
            for doc in beta_ids:
                for kind in ("pages", "sections", "chunks"):
                    conn.execute(
                        f"select count(*) from readable_document_{kind}(%s) where pg_temp.peek(content)", (doc,)
                    ).fetchone()
            plans = [
                "\n".join(r["QUERY PLAN"] for r in conn.execute(f"explain (analyze, verbose, costs off) {query}"))
                for query in (
                    f"select * from search_documents('{SECRET} otter')",
                    f"select * from readable_document_chunks('{beta_ids[0]}') where content ^@ 'Beta'",
                )
            ]
            conn.execute("set local client_min_messages = debug5")
            conn.execute("set local debug_print_plan = on")
            seen_before = len(seen)
            conn.execute("select * from search_documents(%s)", (SECRET,)).fetchall()
            conn.execute("select * from readable_document_chunks(%s)", (beta_ids[0],)).fetchall()
            inside = seen[seen_before:]
            conn.execute("select set_config('request.jwt.claims', 'not json', true)")
            conn.execute("select count(*) from readable_documents()").fetchone()
        assert seen and all(m.startswith("peek") for m in seen[:seen_before]), seen
        assert not any(SECRET in m or "Beta" in m for m in seen[:seen_before]), seen
        for plan in plans:  # the hits alice may see (her two otter pages), and none of beta's chunks
            assert "Function Scan on public." in plan and not re.search(r"Scan on (public\.)?document", plan), plan
        assert re.search(r"rows=2(\.00)? loops", plans[0]) and re.search(r"rows=0(\.00)? loops", plans[1]), plans
        # one plan a statement of alice's (two), none of the statements inside the functions
        assert sum(m.startswith("plan:") for m in inside) == 2, inside


def test_errors_say_nothing_of_other_collections(tenants):
    """A refused call names the argument at fault, never a collection or what is in one."""
    with connect(tenants) as conn:
        for bad, reason in (
            ("select * from search_documents('otter', array['beta'], 'fuzzy')", "unknown mode fuzzy"),
            ("select * from search_documents('', array['beta'])", "the search query is empty"),
            ("select * from search_documents('otter', array['beta'], 'vector')", "needs p_query_embedding"),
        ):
            with pytest.raises(psycopg.errors.InvalidParameterValue) as error, conn.transaction():
                alice(conn)
                conn.execute(bad)
            message = error.value.diag.message_primary or ""
            assert reason in message and "beta" not in message.lower() and SECRET not in message


def test_the_pipeline_and_the_owner_are_not_scoped(tenants):
    with connect(tenants) as conn:
        assert conn.execute("select count(*) as n from documents").fetchone()["n"] == DOCUMENTS
        with conn.transaction():
            conn.execute("set local role ingestion_worker")
            assert conn.execute("select count(*) as n from documents").fetchone()["n"] == DOCUMENTS
            searched = {r["collection"] for r in conn.execute("select collection from search_documents('otter')")}
            assert searched == VISIBLE["owner"] == readable_collections_of(conn)


def test_a_deleted_document_leaves_its_readers(tenants):
    with connect(tenants) as conn:
        [doc] = conn.execute("select id from documents where collection = 'alpha'").fetchall()
        assert conn.execute("select delete_document(%s) as r", (doc["id"],)).fetchone()["r"]["ok"]
        with conn.transaction():
            alice(conn)
            assert readable_collections_of(conn) == VISIBLE["alice"] - {"alpha"}
            for kind in ("pages", "sections", "chunks"):
                rows = conn.execute(f"select * from readable_document_{kind}(%s)", (doc["id"],)).fetchall()
                assert rows == [], kind


def test_supabase_auth_uid_is_who_asks_where_it_exists(tenants):
    """With Supabase's auth.uid() present, it names the user (here a stand-in that says
    bob whatever the claims say), not the claims read directly."""
    with connect(tenants) as conn:
        conn.execute("create schema auth")
        conn.execute(f"create function auth.uid() returns uuid language sql stable as $$ select '{BOB}'::uuid $$")
        conn.execute("grant usage on schema auth to authenticated, anon")
        with conn.transaction():
            alice(conn)
            found = readable_collections_of(conn)
        assert found == VISIBLE["bob"]


def test_new_collections_are_private_until_made_public(tenants, tmp_path: Path):
    folder = tmp_path / "gamma"
    folder.mkdir()
    (folder / "otters.md").write_text("# Gamma otters\n\nThe otter of gamma.\n")
    run("enqueue", str(folder), "--collection", "gamma", "--database-url", tenants)
    with connect(tenants) as conn:
        assert conn.execute("select is_public from collections where name = 'gamma'").fetchone()["is_public"] is False
        with conn.transaction():
            as_reader(conn, "anon", None)
            assert "gamma" not in readable_collections_of(conn)
            assert conn.execute("select * from readable_documents(array['gamma'])").fetchall() == []
