"""The cost of tenant scoping in search (issue 33): a member's search under row-level
security against the owner's search of the same collection.

The database: at least --chunks committed chunks (default 100,000) in --collections
collections (default 20, an equal share each), indexed by the real path: one folder per
collection, `ingest enqueue FOLDER --collection NAME`, then --processes `ingest work
--drain` at once. The text is generated and deterministic (--seed): each collection's
documents come from a word-bigram model of its own random third of the relevance test's
pages (tests/fixtures/relevance/pages, read as data), so collections differ in vocabulary,
with made-up names (a Zipf-distributed pool of 20,000) sprinkled in as the rarest terms;
Markdown, plain text and HTML, with titles and section headings, 1 to ~100 chunks a
document. A database that already holds this build at this checkout's schema (the
migration ledger matches the files; every collection at its share of committed chunks;
nothing queued or failed; the same corpus) is reused; --rebuild builds it anew.

One user (a fixed uuid) is made a reader of exactly one collection X (--collection,
default c07) with grant_collection; no collection is public. After VACUUM ANALYZE, ~50
queries of varied selectivity (one word: rare, uncommon, medium, common, by the share of
X's chunks it is in, counted on the generated text so that every server gets the same
queries; two and three words; questions; "phrases"; -exclusions; words absent from X) are
searched in lexical mode, --warmup untimed rounds then --rounds timed ones, the variants
interleaved (query by query, in each of their six orders in turn):

  owner        select * from search_documents(q, array['X'], 'lexical', 10) as the
               connection's own role (a superuser: row-level security does not apply)
  member       the same with p_collections null, in a transaction that first does what
               PostgREST does: set local role authenticated; set_config('request.jwt.claims',
               '{"sub": "<uuid>", "role": "authenticated"}', true)
  member, {X}  the member with p_collections = array['X']

Timed: the search statement at the client (execute and fetch), each in its own
transaction. Every member search must return the owner's document ids in the owner's
order, every round, and a user who is a member of nothing must get no rows; otherwise the
script exits 1. The bar: member p95 at most 1.2x owner p95. --explain [QUERY] then prints
the plans (EXPLAIN ANALYZE, by auto_explain) of the statements inside the RPC for one
query, as owner and as member.

Server: the package's embedded PostgreSQL (its own folder, --data-dir, kept between runs
so that the build is reused; the server is stopped at the end), or --database-url (a
superuser: it creates the database, sets role authenticated and loads auto_explain). The
database (--database, default bench_search) is kept.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import re
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from common import command_line, db_uri, embedded_server, machine_line, percentile, print_table
from scoping_corpus import build, built, connect, corpus_model
from scoping_queries import Query, pick_queries

from ingestion_pipeline.db.migrate import default_migrations_dir, discover

DATABASE = "bench_search"
USER_ID = uuid.UUID("3f1c0b7e-33a1-4c2e-9d6b-5e0b2a7c9d11")  # the member of X
STRANGER_ID = uuid.UUID("8d2e4f60-33b2-4a7d-8c1e-0f9a6b3d2c44")  # a member of nothing
BAR = 1.2


# -- the searches ---------------------------------------------------------------------

SEARCH_SQL = "select * from search_documents(%s, %s, 'lexical', %s)"  # document_id first


@dataclass
class Variant:
    label: str
    member: uuid.UUID | None  # None: the connection's own role
    scoped_to_x: bool
    seconds: list[float] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))


def claims(user: uuid.UUID) -> str:
    return json.dumps({"sub": str(user), "role": "authenticated"})


def search(
    conn: psycopg.Connection, text: str, collections: list[str] | None, limit: int, member: uuid.UUID | None
) -> tuple[float, list[uuid.UUID]]:
    """One search in its own transaction, as PostgREST runs a request; the statement's time."""
    with conn.transaction():
        if member is not None:
            conn.execute("set local role authenticated")
            conn.execute("select set_config('request.jwt.claims', %s, true)", (claims(member),))
        began = time.perf_counter()
        rows = conn.execute(SEARCH_SQL, (text, collections, limit)).fetchall()
        seconds = time.perf_counter() - began
    return seconds, [r[0] for r in rows]


def measure(uri: str, queries: list[Query], x: str, rounds: int, warmup: int, limit: int) -> tuple[list[Variant], int]:
    """Every query in every variant, `warmup` untimed rounds then `rounds` timed ones; the
    variants in each of their six orders in turn. Exits if a member's results differ from the
    owner's (every round) or a member of nothing gets a row."""
    variants = [
        Variant(f"owner, p_collections {{{x}}}", None, True),
        Variant("member (RLS), p_collections null", USER_ID, False),
        Variant(f"member (RLS), p_collections {{{x}}}", USER_ID, True),
    ]
    # Each variant after each other one equally often (a rotation would keep one order: on
    # PostgreSQL 18 a member's search right after the owner's is the slower one).
    orders = list(itertools.permutations(variants))
    mismatches = []
    hits = 0
    began = time.perf_counter()
    with connect(uri) as conn:
        for round_ in range(warmup + rounds):
            for i, q in enumerate(queries):
                results = {}
                for v in orders[(round_ * len(queries) + i) % len(orders)]:
                    seconds, ids = search(conn, q.text, [x] if v.scoped_to_x else None, limit, v.member)
                    results[v.label] = ids
                    if round_ >= warmup:
                        v.seconds.append(seconds)
                        v.by_kind[q.kind].append(seconds)
                owner = results[variants[0].label]
                hits += len(owner) if round_ == 0 else 0
                for v in variants[1:]:
                    if results[v.label] != owner:
                        mismatches.append((round_, q.text, v.label, owner, results[v.label]))
            kind = "warm-up" if round_ < warmup else "timed"
            print(f"  round {round_ + 1} ({kind}) done at {time.perf_counter() - began:.0f}s", file=sys.stderr)
        for q in queries:
            _, ids = search(conn, q.text, None, limit, STRANGER_ID)
            if ids:
                mismatches.append(("-", q.text, "a member of nothing", [], ids))
    if mismatches:
        for m in mismatches[:10]:
            print(f"MISMATCH round {m[0]} query {m[1]!r}, {m[2]}: owner {m[3]} vs {m[4]}", file=sys.stderr)
        raise SystemExit(f"FAIL: {len(mismatches)} searches returned other rows than the owner's (or any row)")
    return variants, hits


# -- where the time goes --------------------------------------------------------------


def costliest(queries: list[Query], variants: list[Variant]) -> str:
    """The query whose member p50 exceeds the owner's by the most milliseconds."""
    owner, member = variants[0], variants[1]

    def extra(i: int) -> float:
        return percentile(member.seconds[i :: len(queries)], 50) - percentile(owner.seconds[i :: len(queries)], 50)

    return queries[max(range(len(queries)), key=extra)].text


# The two statements that do the work: search_lexical_hits' body, the RPC's final join.
PLAN_MARKS = {"chunks as (": "search_lexical_hits", "with lists as": "search_documents (return query)"}
# At level warning: the search functions run with client_min_messages = warning, which would
# keep a LOG from this client.
AUTO_EXPLAIN = (
    "log_min_duration = 0",
    "log_analyze = on",
    "log_buffers = on",
    "log_nested_statements = on",
    "log_level = warning",
)


def explain(uri: str, text: str, x: str, limit: int) -> None:
    """The plans of the statements inside the RPC (auto_explain, nested statements, sent to
    this client as warnings) for one query, as owner and as member. Needs a superuser (LOAD)."""
    for label, member, collections in (("owner", None, [x]), ("member (RLS)", USER_ID, None)):
        plans: list[str] = []
        with connect(uri) as conn:
            conn.add_notice_handler(lambda diag, plans=plans: plans.append(diag.message_primary or ""))
            conn.execute("load 'auto_explain'")
            for setting in AUTO_EXPLAIN:
                conn.execute(f"set auto_explain.{setting}")
            search(conn, text, collections, limit, member)
        for plan in plans:
            statement = next((name for mark, name in PLAN_MARKS.items() if mark in plan), None)
            if statement:
                print(f"\n### {label}, {text!r}: {statement}\n")
                print(without_query_text(plan))


def without_query_text(plan: str) -> str:
    """auto_explain's message without the statement's text (the plan and its parameters)."""
    lines = plan.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Query Text:"))
    end = next(i for i, line in enumerate(lines) if i > start and re.match(r"(Query Parameters|\S.*\(cost=)", line))
    return "\n".join([*lines[:start], *lines[end:]])


# -- main -----------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def prepare(uri: str, args: argparse.Namespace, counts: dict) -> list[Query]:
    """The member's grant (X only, nothing public), fresh statistics, and the queries."""
    with connect(uri) as conn:
        conn.execute("update collections set is_public = false where is_public")
        conn.execute("delete from collection_members where user_id in (%s, %s)", (USER_ID, STRANGER_ID))
        granted = conn.execute("select grant_collection(%s, %s, 'reader')", (args.collection, USER_ID)).fetchone()
        if not granted[0]["ok"]:
            raise SystemExit(f"grant_collection refused: {granted[0]}")
        for table in ("documents", "document_sections", "document_chunks", "index_generations", "collections"):
            conn.execute(f"vacuum (analyze) {table}")
        conn.execute("analyze collection_members")
        model = corpus_model(args.collections, args.seed)
        queries = pick_queries(conn, model, args.collection, math.ceil(args.chunks / args.collections), args.seed)
        role, superuser = conn.execute(
            "select current_user, (select rolsuper from pg_roles where rolname = current_user)"
        ).fetchone()
        members = conn.execute("select collection from collection_members where user_id = %s", (USER_ID,)).fetchall()
    assert members == [(args.collection,)], members
    print(f"owner: role {role} (superuser: {superuser}); member: user {USER_ID}, reader of {members[0][0]} only")
    return queries


def report(queries: list[Query], variants: list[Variant], args: argparse.Namespace, chunks: int, hits: int) -> None:
    x = args.collection
    print(
        f"\nresults identical: every member search returned the owner's document ids in the owner's order "
        f"({len(queries)} queries x {args.warmup + args.rounds} rounds x 2 member variants; {hits} hits a round); "
        "a member of nothing got no rows"
    )
    owner_p95 = percentile(variants[0].seconds, 95)
    print_table(
        f"lexical search, {len(queries)} queries x {args.rounds} rounds, limit {args.limit}, {chunks} chunks in "
        f"{args.collections} collections; X = {x} (ms, the search statement at the client)",
        ["variant", "searches", "p50", "p95", "mean", "max", "p95 / owner p95"],
        [
            [
                v.label,
                len(v.seconds),
                ms(percentile(v.seconds, 50)),
                ms(percentile(v.seconds, 95)),
                ms(sum(v.seconds) / len(v.seconds)),
                ms(max(v.seconds)),
                f"{percentile(v.seconds, 95) / owner_p95:.2f}",
            ]
            for v in variants
        ],
    )
    kinds = list(dict.fromkeys(q.kind for q in queries))
    print_table(
        "p50 by kind of query (ms)",
        ["kind", "queries", "owner", "member", f"member, {{{x}}}", "member / owner"],
        [
            [
                kind,
                sum(1 for q in queries if q.kind == kind),
                *[ms(percentile(v.by_kind[kind], 50)) for v in variants],
                f"{percentile(variants[1].by_kind[kind], 50) / percentile(variants[0].by_kind[kind], 50):.2f}",
            ]
            for kind in kinds
        ],
    )
    ratio = percentile(variants[1].seconds, 95) / owner_p95
    print(f"\nmember p95 / owner p95 = {ratio:.2f} (bar: at most {BAR}): {'met' if ratio <= BAR else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--database-url",
        help="a server to use, as a superuser (its database name is not used: see --database; default: the "
        "embedded server under --data-dir)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ingest-bench-search-latency",
        help="the embedded server's folder, kept between runs (default: %(default)s)",
    )
    parser.add_argument(
        "--database",
        default=DATABASE,
        help="the bench's database, kept (default %(default)s; rebuilt only if named bench_…)",
    )
    parser.add_argument("--chunks", type=int, default=100_000, help="committed chunks at least (default 100000)")
    parser.add_argument("--collections", type=int, default=20, help="collections (default 20)")
    parser.add_argument("--collection", default="c07", help="the member's collection X (default c07)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds over the queries (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--limit", type=int, default=10, help="hits per search (default 10)")
    parser.add_argument(
        "--max-matches",
        type=int,
        help="only the queries whose terms match at most this many chunks in all collections (default: every query)",
    )
    parser.add_argument("--processes", type=int, default=2, help="`ingest work --drain` processes (default 2)")
    parser.add_argument("--seed", type=int, default=33, help="corpus and query seed (default 33)")
    parser.add_argument("--rebuild", action="store_true", help="drop and build the database even if it is built")
    parser.add_argument("--build-only", action="store_true", help="build (or check) the database, then stop")
    parser.add_argument(
        "--explain",
        nargs="?",
        const="",
        metavar="QUERY",
        help="then print the plans of the RPC's statements for QUERY, as owner and as member (no QUERY: the one "
        "whose member p50 exceeds the owner's the most)",
    )
    args = parser.parse_args()
    share = math.ceil(args.chunks / args.collections)

    server_cm = (
        contextlib.nullcontext(args.database_url) if args.database_url else embedded_server(data_dir=args.data_dir)
    )
    with server_cm as server:
        uri = db_uri(server, args.database)
        print(f"$ {command_line()}")
        print(machine_line(server))
        newest = discover(default_migrations_dir())[-1]
        print(f"schema: migration {newest.version}_{newest.name} (sha256 {newest.checksum[:12]}…)")
        began = time.perf_counter()
        counts, why = (None, "--rebuild") if args.rebuild else built(uri, args, share)
        if counts is None:
            print(f"building database {args.database} ({why})", flush=True)
            build(server, uri, args, share)
            counts, why = built(uri, args, share)
            if counts is None:
                raise SystemExit(f"FAIL: the build is not what it should be: {why}")
            print(f"built in {time.perf_counter() - began:.1f}s")
        else:
            print(f"reusing database {args.database}: {why}")
        if args.collection not in counts:
            raise SystemExit(f"no collection {args.collection}")
        documents, chunks = (sum(c[i] for c in counts.values()) for i in range(2))
        sizes = [c[1] for c in counts.values()]
        print(
            f"{chunks} committed chunks of {documents} documents in {len(counts)} collections ({min(sizes)}-"
            f"{max(sizes)} chunks each); X = {args.collection}: {counts[args.collection][0]} documents, "
            f"{counts[args.collection][1]} chunks"
        )
        if args.build_only:
            return

        queries = prepare(uri, args, counts)
        print_table(
            f"{len(queries)} queries (chunks their terms match: in {args.collection} / in every collection)",
            ["kind", "query", f"in {args.collection}", "everywhere"],
            [[q.kind, q.text, q.in_x, q.everywhere] for q in queries],
        )
        if args.max_matches is not None:
            queries = [q for q in queries if q.everywhere <= args.max_matches]
            print(f"\n--max-matches {args.max_matches}: {len(queries)} of these queries are searched")
        variants, hits = measure(uri, queries, args.collection, args.rounds, args.warmup, args.limit)
        report(queries, variants, args, chunks, hits)
        if args.explain is not None:
            explain(uri, args.explain or costliest(queries, variants), args.collection, args.limit)


if __name__ == "__main__":
    main()
