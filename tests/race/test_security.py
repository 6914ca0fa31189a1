"""Privileges: every function in schema public runs as its owner with a pinned
search_path (except `secure_rpc` and the migrations' revoke helper, by design, and the
search RPC, which runs as its caller so that row-level security applies); EXECUTE is
revoked from PUBLIC and granted to `ingestion_worker` for the RPCs only; on tables, views
and sequences the worker reads what it reads and inserts artifact rows, nothing else; an
app's roles (anon, authenticated) run the search and the readers' functions and select
`documents.id` under row-level security (tests/search/test_tenants.py); every other role gets
nothing.

Nothing is filtered by name: every function (`pg_proc`, any kind) and every relation
(`pg_class`: tables, views, materialized views, partitioned and foreign tables,
sequences) of schema public is enumerated, and a function the sets below do not name
fails the test until someone decides whether the worker may call it. The migrator owns
no function (its only object is the table `ingest_schema_migrations`, which is checked
like the others), and no extension is installed in public, so nothing is excluded.
"""

import psycopg
import pytest

from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import seed_job

OUTSIDER = "ingest_test_outsider"
SEARCH_PATH = "search_path=pg_catalog, pg_temp"

# Functions ingestion_worker may EXECUTE: the RPCs.
WORKER_RPCS = {
    "create_import_batch",
    "enqueue_ingestion_job",
    "claim_ingestion_jobs",
    "heartbeat_ingestion_job",
    "begin_document_index_generation",
    "commit_document_index_generation",
    "complete_ingestion_job",
    "commit_and_complete_ingestion_job",
    "fail_or_retry_ingestion_job",
    "record_ingestion_job_stage",
    "retry_ingestion_job",
    "refresh_import_batch_status",
    "refresh_stuck_import_batches",
    "expire_stale_ingestion_jobs",
    "cleanup_abandoned_document_index_generations",
    "ingestion_queue_health",
    "ingestion_batch_report",
    "ingestion_sensor_state",
    # bulk acknowledgement and the counters' repair path (20261201000100)
    "complete_ingestion_jobs",
    "fail_or_retry_ingestion_jobs",
    "heartbeat_ingestion_jobs",
    "refresh_drifted_import_batches",
    # the lifecycle's operator calls, run as the pipeline's role like retry (20261201000200)
    "delete_document",
    "cancel_import_batch",
    "retry_failed_ingestion_jobs",
    # documents by source key: the enqueue of a version, `ingest show` (20261202000200)
    "enqueue_document_version",
    "document_history",
    # the janitor's pass over older versions' kept bytes (20261202000300)
    "cleanup_kept_version_bytes",
    # registered sources and the lease of their syncs (20261202000400)
    "register_sync_source",
    "remove_sync_source",
    "begin_source_sync",
    "renew_source_sync",
    "finish_source_sync",
    "known_source_versions",
    # a sync's delete, under its listing's version and its lease (20261204000200)
    "delete_vanished_document",
    # collections for the operator, and the search (20261203000100)
    "add_collection",
    "list_collections",
    "grant_collection",
    "revoke_collection",
    "search_documents",
    "search_lexical_hits",
    "search_vector_hits",
    "readable_documents",
    "readable_document_pages",
    "readable_document_sections",
    "readable_document_chunks",
    # the term counts' janitor pass and check (20261203000200)
    "compact_search_term_counts",
    "search_term_count_drift",
    # the check of the search's committed chunks (20261204000100)
    "searchable_chunks_drift",
    # a worker fault: the job released, its attempt refunded (20261204000400)
    "release_ingestion_job",
    # an empty collection removed, for the operator (20261205000400)
    "remove_collection",
    # what the index holds, for `ingest status` and the Dagster asset (20261206000100)
    "ingestion_index_totals",
    # the queue's metrics, read at each scrape of `ingest metrics` (20261206000300)
    "ingestion_queue_metrics",
    # a PDF hit's page label, for readers and the worker (20261206000800)
    "readable_page_labels",
    # the passages of a search (20261206000900)
    "search_passages",
}
# Internal helpers (called by the RPCs or the trigger as their owner): granted to no one.
INTERNAL = {
    "refuse_cancelled_batch",
    "lock_fenced_ingestion_job",
    "refresh_import_batches",
    "stuck_import_batch_ids",
    "enforce_artifact_fence",
    "secure_rpc",
    "move_import_batch_counters",
    "import_batch_status_of",
    "settle_completed_ingestion_jobs",
    "settle_failed_ingestion_job",
    "drifted_import_batch_ids",
    "insert_ingestion_job_stages",
    "import_batch_counters_of",
    "cancel_import_batch_counters",
    "cancel_locked_ingestion_jobs",
    # trigger functions: the weighted search vector (20261201000300), and the move of
    # a chunk's vector into pgvector's column where the extension is (20261201000400)
    "document_chunks_search_vector",
    "document_chunks_embedding_vector",
    # the lock order's phases, the fences and the checks before effects (20261202000100)
    "max_ack_items",
    "require_fence",
    "require_failed_document_status",
    "require_ack_items",
    "lock_settling_ingestion_jobs",
    "fence_refusal",
    "lock_commit_generations",
    "lock_documents",
    "generation_refusal",
    "apply_generation_commit",
    # the kept bytes a cleanup call removes; the migrations' revoke from Supabase's roles (20261202000300)
    "owed_kept_version_bytes",
    "revoke_from_supabase_roles",
    # collections and who may read them; the search's parts (20261203000100)
    "register_document_collections",
    "request_user_id",
    "readable_collections",
    "search_scope",
    "search_query_terms",
    "search_vector_snippet",
    "document_is_readable",
    # BM25 search: the vectors, the term counts and their trigger, the query (20261203000200)
    "search_stop_words",
    "search_field_vector",
    "search_identifier_text",
    "search_generation_terms",
    "search_committed_terms",
    "count_search_terms",
    "search_query_lexemes",
    "search_lexeme_query",
    # the search's committed chunks and their trigger; the query's caps (20261204000100)
    "track_searchable_chunks",
    "search_query_refusal",
    "search_collection_lexeme",
    "search_scope_query",
    # Issue 44 (20261204000300): the kept-bytes bookkeeping, the previous release's keyless insert
    "track_oldest_kept_version",
    "keyless_insert_meets_keyed_copy",
    # issue 47 (20261205000300): a generation's mean vector and its trigger; a question's test
    "generation_mean_embedding",
    "index_generation_mean_embedding",
    "search_query_is_question",
    "search_vector_ranked",
    "search_vector_shown",
    # issue 58 (20261206000700): the advisory lock key of a collection's name
    "collection_lock_key",
    # issue 60 (20261206000900): the search's passages, its evidence floor and its parts
    "search_chunk_scores",
    "search_vector_floor",
    "search_ranked_documents",
    "search_highlight_query",
    "search_chunk_snippet",
    "search_arguments_refusal",
    # issues 59 and 60 (20261206001100): the lexical hits with their best passages, the words' lead
    "search_lexical_ranked",
    "search_word_confidence",
    # issue 60 (20261207000100): the documents of the chunks most like the query
    "search_vector_passages",
    "search_chunk_expressions",
    # issue 60 (20261207000300): the lexical hits, with their snippets or without
    "search_lexical_ranking",
}
# Created only where the server has pgvector.
OPTIONAL = {"document_chunks_embedding_vector"}
# secure_rpc and revoke_from_supabase_roles are run only by the migrations, as the owner of
# what they alter: SECURITY INVOKER by design (as definers they would let a caller alter or
# revoke anything).
INVOKER = {"secure_rpc", "revoke_from_supabase_roles"}
# The search RPC runs as its owner since 20261204000100 (app roles hold no table privilege);
# it checks the caller's scope itself.
# The search functions are never planned generically (the generic-plan trap: a cached
# generic plan may scan every chunk); every other function pins search_path only.
FORCE_CUSTOM_PLAN = "plan_cache_mode=force_custom_plan"
CUSTOM_PLANS = {
    "search_passages",
    "search_vector_passages",
    "search_lexical_ranked",
    "search_lexical_ranking",
    "search_chunk_scores",
    "search_ranked_documents",
    "search_documents",
    "search_lexical_hits",
    "search_vector_hits",
    "search_vector_ranked",
    "search_vector_shown",
    "readable_documents",
}
# The lexical search reads its candidates through the GIN index whatever the planner's
# estimates (20261203000200): its cost is bounded by the postings it reads. What a reader's
# call reads is its own collections' rows only, through index scans (a bitmap only for the
# GIN index, turned on for that statement), never a scan of every tenant's (20261204000100).
# The janitor's term-count and kept-bytes passes read their candidates through partial indexes
# (20261204000300): a pass with nothing to do reads no row, on a small table too.
NO_SEQ_SCAN = "enable_seqscan=off"
NO_SEQ_SCAN_FUNCTIONS = {
    "search_passages",
    "search_vector_passages",
    "search_lexical_ranked",
    "search_lexical_ranking",
    "search_chunk_scores",
    "search_ranked_documents",
    "search_documents",
    "search_lexical_hits",
    "search_vector_hits",
    "search_vector_ranked",
    "search_vector_shown",
    "readable_documents",
    "readable_collections",
    "compact_search_term_counts",
    "owed_kept_version_bytes",
    "cleanup_kept_version_bytes",
    "track_oldest_kept_version",
}
NO_BITMAP_SCAN = "enable_bitmapscan=off"
NO_BITMAP_SCAN_FUNCTIONS = {
    "search_passages",
    "search_vector_passages",
    "search_lexical_ranked",
    "search_lexical_ranking",
    "search_chunk_scores",
    "search_ranked_documents",
    "owed_kept_version_bytes",
    "search_documents",
    "search_lexical_hits",
    "search_vector_hits",
    "search_vector_ranked",
    "search_vector_shown",
    "readable_documents",
    "readable_collections",
}
# The search functions read the same rows whatever VACUUM last marked all-visible
# (search_documents since 20261204000500: its check of each hit's document).
NO_INDEX_ONLY_SCAN = "enable_indexonlyscan=off"
NO_INDEX_ONLY_SCAN_FUNCTIONS = {
    "search_passages",
    "search_vector_passages",
    "search_lexical_ranked",
    "search_lexical_ranking",
    "search_chunk_scores",
    "search_ranked_documents",
    "search_lexical_hits",
    "search_vector_hits",
    "search_vector_ranked",
    "search_vector_shown",
    "search_documents",
}
# ... and join rows by primary key, never by reading a whole table into a hash or a merge.
NESTED_LOOPS = ["enable_hashjoin=off", "enable_mergejoin=off"]
NESTED_LOOP_FUNCTIONS = {
    "search_passages",
    "search_vector_passages",
    "search_lexical_ranked",
    "search_lexical_ranking",
    "search_chunk_scores",
    "search_ranked_documents",
    "search_lexical_hits",
    "search_vector_hits",
    "search_vector_ranked",
    "search_vector_shown",
    "search_documents",
    "cleanup_kept_version_bytes",
    "cleanup_abandoned_document_index_generations",
}
# What readers reach sends them no message of its own (a reader's debug_print_plan would show
# the plans of the statements inside, with the owner's statistics).
QUIET = "client_min_messages=warning"
QUIET_FUNCTIONS = CUSTOM_PLANS | {
    "request_user_id",
    "readable_collections",
    "search_scope",
    "document_is_readable",
    "readable_documents",
    "readable_document_pages",
    "readable_document_sections",
    "readable_document_chunks",
    "readable_page_labels",
}
# A function that takes a table lock waits for it a bounded time: the writers that queue
# behind its request stall at most that long (remove_collection's SHARE lock on documents).
LOCK_TIMEOUT = "lock_timeout=5s"
LOCK_TIMEOUT_FUNCTIONS = {"remove_collection"}

# What an app's roles (PostgREST's anon and authenticated, created by 20261203000100 where
# they were not there) may run and read; row-level security decides which rows.
READER_FUNCTIONS = {
    "search_documents",
    "search_passages",
    "readable_collections",
    "readable_documents",
    "readable_document_pages",
    "readable_document_sections",
    "readable_document_chunks",
    "readable_page_labels",
}
# Nothing: a reader's filter on a table it may select runs before any policy, and EXPLAIN
# ANALYZE's row counts then describe rows it may not read (20261204000100 revoked documents.id).
READER_RELATION_PRIVILEGES: dict[str, set[str]] = {}

# What ingestion_worker may do to each relation; every relation not named: nothing.
WORKER_RELATION_PRIVILEGES = {
    "documents": {"SELECT"},
    "document_sources": {"SELECT"},
    "document_versions": {"SELECT"},
    "document_version_sources": {"SELECT"},
    "sync_sources": {"SELECT"},
    "collections": {"SELECT"},
    "collection_members": {"SELECT"},
    "import_batches": {"SELECT"},
    "ingestion_jobs": {"SELECT"},
    "index_generations": {"SELECT"},
    "ingestion_job_stages": {"SELECT"},
    "committed_document_chunks": {"SELECT"},
    "document_pages": {"SELECT", "INSERT"},
    "document_sections": {"SELECT", "INSERT"},
    "document_chunks": {"SELECT", "INSERT"},
    "searchable_chunks": {"SELECT"},
}

TABLE_PRIVILEGES = ["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"]
COLUMN_PRIVILEGES = ["SELECT", "INSERT", "UPDATE", "REFERENCES"]
SEQUENCE_PRIVILEGES = ["USAGE", "SELECT", "UPDATE"]


def public_functions(conn) -> list[dict]:
    """Every function of schema public, whatever its name or kind, except an extension's own
    (pgvector's operators and casts, where it was created in public)."""
    return conn.execute(
        """select p.oid, p.proname, p.oid::regprocedure::text as signature, p.proconfig, p.prosecdef
             from pg_proc p
            where p.pronamespace = 'public'::regnamespace
              and not exists (select 1 from pg_depend d
                              where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
            order by 3"""
    ).fetchall()


def executable(conn, role: str) -> set[str]:
    """Names of the functions of public that `role` may execute ('public' = PUBLIC)."""
    return {
        row["proname"]
        for row in public_functions(conn)
        if conn.execute("select has_function_privilege(%s, %s::oid, 'EXECUTE') as ok", (role, row["oid"])).fetchone()[
            "ok"
        ]
    }


def relation_privileges(conn, role: str) -> dict[str, set[str]]:
    """Every privilege `role` holds on every table, view and sequence of public (column
    grants that the table-level check would miss listed as `<PRIVILEGE> (column)`);
    relations with none are left out."""
    table_privileges = list(TABLE_PRIVILEGES)
    if conn.execute("select current_setting('server_version_num')::int >= 170000 as v").fetchone()["v"]:
        table_privileges.append("MAINTAIN")
    held: dict[str, set[str]] = {}
    relations = conn.execute(
        """select c.oid, c.relname, c.relkind from pg_class c
            where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
            order by c.relname"""
    ).fetchall()
    assert len(relations) >= 12
    for rel in relations:
        got = set()
        if rel["relkind"] == "S":
            for privilege in SEQUENCE_PRIVILEGES:
                if conn.execute(
                    "select has_sequence_privilege(%s, %s::oid, %s) as ok", (role, rel["oid"], privilege)
                ).fetchone()["ok"]:
                    got.add(privilege)
        else:
            for privilege in table_privileges:
                if conn.execute(
                    "select has_table_privilege(%s, %s::oid, %s) as ok", (role, rel["oid"], privilege)
                ).fetchone()["ok"]:
                    got.add(privilege)
            for privilege in COLUMN_PRIVILEGES:
                if (
                    privilege not in got
                    and conn.execute(
                        "select has_any_column_privilege(%s, %s::oid, %s) as ok", (role, rel["oid"], privilege)
                    ).fetchone()["ok"]
                ):
                    got.add(f"{privilege} (column)")
        if got:
            held[rel["relname"]] = got
    return held


def create_role(conn, role: str) -> None:
    conn.execute(f"""do $$ begin
        if not exists (select 1 from pg_roles where rolname = '{role}') then
            create role {role} nologin;
        end if; end $$""")


@pytest.fixture
def outsider(conn):
    create_role(conn, OUTSIDER)
    conn.execute(f"grant usage on schema public to {OUTSIDER}")
    return OUTSIDER


def test_every_function_is_classified_pins_search_path_and_runs_as_definer(conn):
    functions = public_functions(conn)
    names = [row["proname"] for row in functions]
    assert set(names) - OPTIONAL == (WORKER_RPCS | INTERNAL) - OPTIONAL, (
        "a function of public that is neither an RPC nor a helper"
    )
    assert len(names) == len(set(names)), "an overload nobody classified"
    assert "enforce_artifact_fence" in names  # the trigger function, like the RPCs
    for row in functions:
        expected = [SEARCH_PATH]
        expected += [FORCE_CUSTOM_PLAN] if row["proname"] in CUSTOM_PLANS else []
        expected += [NO_SEQ_SCAN] if row["proname"] in NO_SEQ_SCAN_FUNCTIONS else []
        expected += [NO_BITMAP_SCAN] if row["proname"] in NO_BITMAP_SCAN_FUNCTIONS else []
        expected += [NO_INDEX_ONLY_SCAN] if row["proname"] in NO_INDEX_ONLY_SCAN_FUNCTIONS else []
        expected += NESTED_LOOPS if row["proname"] in NESTED_LOOP_FUNCTIONS else []
        expected += [QUIET] if row["proname"] in QUIET_FUNCTIONS else []
        expected += [LOCK_TIMEOUT] if row["proname"] in LOCK_TIMEOUT_FUNCTIONS else []
        assert sorted(row["proconfig"]) == sorted(expected), row["signature"]
        assert row["prosecdef"] == (row["proname"] not in INVOKER), row["signature"]


def test_secure_rpc_is_an_invoker_function_nobody_but_its_owner_may_run(conn):
    row = conn.execute(
        """select p.prosecdef, p.proconfig, pg_get_userbyid(p.proowner) as owner,
                  (select array_agg(a.grantee::regrole::text order by a.grantee)
                     from aclexplode(p.proacl) a) as grantees
             from pg_proc p where p.oid = 'public.secure_rpc(regprocedure, boolean)'::regprocedure"""
    ).fetchone()
    assert row["prosecdef"] is False
    assert row["proconfig"] == [SEARCH_PATH]
    assert row["grantees"] == [row["owner"]]  # an explicit ACL, and only the owner in it


def test_a_role_without_the_grant_cannot_execute_or_touch_a_relation(conn, outsider):
    seed_job(conn)
    assert executable(conn, outsider) == set()
    assert relation_privileges(conn, outsider) == {}
    conn.execute(f"set role {outsider}")
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            AnySchemaRpc(conn).claim("intruder")
    finally:
        conn.execute("reset role")


def test_public_gets_nothing(conn):
    assert executable(conn, "public") == set()
    assert relation_privileges(conn, "public") == {}


def test_the_worker_role_has_exactly_its_grants(conn):
    assert executable(conn, "ingestion_worker") == WORKER_RPCS
    assert relation_privileges(conn, "ingestion_worker") == WORKER_RELATION_PRIVILEGES


def test_the_worker_role_runs_rpcs_but_cannot_write_the_queue(conn):
    _, job_id = seed_job(conn)
    conn.execute("set role ingestion_worker")
    try:
        [claimed] = AnySchemaRpc(conn).claim("worker-1")
        assert claimed.job_id == job_id
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("update ingestion_jobs set status = 'completed'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select public.lock_fenced_ingestion_job(%s, null, 'worker-1', null)", (job_id,))
    finally:
        conn.execute("reset role")


@pytest.fixture
def supabase_db_url(pg_server, conn):
    """A database migrated to head where anon/authenticated existed beforehand and the
    default privileges (as on Supabase) hand them every new function, table and sequence."""
    for role in ("anon", "authenticated"):
        create_role(conn, role)
    from ingestion_pipeline.db import migrate as migrator
    from tests.conftest import _fresh_database

    for url in _fresh_database(pg_server, "template0"):
        with psycopg.connect(url, autocommit=True) as fresh:
            for objects, privilege in (("functions", "execute"), ("tables", "all"), ("sequences", "all")):
                fresh.execute(
                    f"alter default privileges in schema public grant {privilege} on {objects} to anon, authenticated"
                )
        migrator.migrate(url)
        yield url


def test_supabase_roles_get_exactly_the_readers_grants(supabase_db_url):
    """When anon/authenticated exist at migration time, they get the readers' grants and
    nothing else, even where default privileges would hand them every new function, table
    and sequence."""
    from psycopg.rows import dict_row

    with psycopg.connect(supabase_db_url, autocommit=True, row_factory=dict_row) as fresh:
        for role in ("anon", "authenticated"):
            assert executable(fresh, role) == READER_FUNCTIONS, role
            assert relation_privileges(fresh, role) == READER_RELATION_PRIVILEGES, role
        assert executable(fresh, "public") == set()
        assert relation_privileges(fresh, "public") == {}
        assert executable(fresh, "ingestion_worker") == WORKER_RPCS
        assert relation_privileges(fresh, "ingestion_worker") == WORKER_RELATION_PRIVILEGES


def test_the_readers_roles_have_exactly_their_grants(conn):
    """Where they did not exist, the migration created them, with the same grants."""
    for role in ("anon", "authenticated"):
        assert executable(conn, role) == READER_FUNCTIONS, role
        assert relation_privileges(conn, role) == READER_RELATION_PRIVILEGES, role


def test_supabase_roles_cannot_execute_secure_rpc(supabase_db_url):
    """The hardening migration revoked secure_rpc from PUBLIC only, so Supabase's default
    privileges left anon/authenticated EXECUTE on it; the lease-token migration takes it
    back (harmless before in effect: it runs as the caller, whose ALTER fails)."""
    from psycopg.rows import dict_row

    with psycopg.connect(supabase_db_url, autocommit=True, row_factory=dict_row) as fresh:
        assert {role: "secure_rpc" in executable(fresh, role) for role in ("anon", "authenticated")} == {
            "anon": False,
            "authenticated": False,
        }
