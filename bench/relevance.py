"""Search relevance on the relevance corpus of the tests (tests/fixtures/relevance: 41
project-written HTML pages of a database operations manual, 47 queries, each with the page
that answers it; read as data files, the metrics from ingestion_pipeline.search.evaluation).

A fresh database at head is filled by `ingest enqueue` and `ingest work --drain`, then each
query is searched with ingestion_pipeline.search.search(mode="lexical"), one hit per page.
Printed: each query's rank ("-": not in the results), recall@5 (the expected page among the
first 5 results), MRR@10 (1/rank within the first 10, else 0), and both by kind of query.

The run before the weighted ranker (issue 21: the schema before `weighted_search` and that
release's SQL) is in results/relevance.md; this release's client no longer speaks that
schema (docs/operations.md, "Upgrading"), so the bench measures head only.

Server: a private embedded PostgreSQL by default, or --database-url (the role needs
CREATEDB; the scratch database is dropped at the end).
"""

from __future__ import annotations

import argparse
import contextlib
import os

from common import (
    ROOT,
    command_line,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    print_table,
)

from ingestion_pipeline import cli
from ingestion_pipeline.search import search
from ingestion_pipeline.search.evaluation import (
    SUMMARY_HEADERS,
    Query,
    Ranked,
    load_judgments,
    rank_cell,
    rank_queries,
    summarize,
)

DATABASE = "bench_relevance"
CORPUS = ROOT / "tests" / "fixtures" / "relevance"


def index_pages(uri: str) -> int:
    """Every page in one batch, drained by `ingest work` (parsing in its threads); the count."""
    common = ["--database-url", uri]
    if cli.main(["enqueue", str(CORPUS / "pages"), "--batch", "relevance corpus", *common]) != 0:
        raise SystemExit("ingest enqueue failed")
    if cli.main(["work", "--drain", "--parse-processes", "0", *common]) != 0:
        raise SystemExit("ingest work failed")
    return len(list((CORPUS / "pages").glob("*.html")))


def measure(server: str, queries: list[Query], limit: int) -> list[Ranked]:
    uri = create_database(server, DATABASE, migrate=True)
    try:
        print(f"{index_pages(uri)} pages indexed", flush=True)
        with connect(uri) as conn:
            return rank_queries(
                queries, lambda text: [hit.source_name for hit in search(conn, text, mode="lexical", limit=limit)]
            )
    finally:
        drop_database(server, DATABASE)


def print_results(ranked: list[Ranked], limit: int) -> None:
    print_table(
        "rank of the expected page among the pages shown (-: not in the results)",
        ["kind", "query", "expected", "rank", "first"],
        [[r.query.kind, r.query.text, r.query.expected, rank_cell(r.rank), _first(r)] for r in ranked],
    )
    print_table(
        f"lexical search, {len(ranked)} queries, {limit} results per query",
        SUMMARY_HEADERS,
        [summarize([r.rank for r in ranked]).row("search(), weighted")],
    )
    kinds = sorted({r.query.kind for r in ranked})
    print_table(
        "by kind of query",
        ["kind", "queries", "recall@5 / MRR@10"],
        [[kind, sum(1 for r in ranked if r.query.kind == kind), _by_kind(ranked, kind)] for kind in kinds],
    )


def _first(ranked: Ranked) -> str:
    """What came first, when it was not the expected page."""
    return "" if ranked.rank == 1 else (ranked.top or "(nothing)")


def _by_kind(ranked: list[Ranked], kind: str) -> str:
    summary = summarize([r.rank for r in ranked if r.query.kind == kind])
    return f"{summary.recall_at_5:.2f} / {summary.mrr_at_10:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL"),
        help="server to create the scratch databases on (default: a private embedded one)",
    )
    parser.add_argument("--limit", type=int, default=10, help="results per query (default 10: MRR@10 needs 10)")
    args = parser.parse_args()

    queries = load_judgments(CORPUS / "queries.json")
    server_cm = embedded_server() if not args.database_url else contextlib.nullcontext(args.database_url)
    with server_cm as server:
        print(f"$ {command_line()}")
        print(machine_line(server))
        ranked = measure(server, queries, args.limit)
    print_results(ranked, args.limit)


if __name__ == "__main__":
    main()
