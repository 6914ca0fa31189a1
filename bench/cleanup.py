"""The guarded cleanup of abandoned index generations, in three modes.

--mode indexing (the default): cleaning many abandoned chunk rows in bounded passes while
a worker keeps indexing. Seeds D documents (no open job) each with one abandoned generation of C chunks (D*C =
--chunks, default 1M) with `insert ... select generate_series`. A worker process then
indexes a generated corpus over and over (enqueue with reindex, drain, repeat; each
round also leaves superseded generations behind). After a baseline window without
cleanup, this process calls `rpc.cleanup_generations(limit=L, dry_run=False)` until a pass
finds nothing. Each pass is one transaction, so its duration is the upper bound of every
lock it holds (the proxy for lock hold). A sampler polls pg_stat_activity every 20 ms
for sessions waiting on a lock held by the cleanup's backend.

Reported: passes, rows, time, per-pass p50/p99/max; the worker's docs/s and write/commit
stage times (stage log) in the baseline window and during cleanup.

--mode scale: does a pass cost the same however many documents are present? One database
per size in --live (default 10k and 100k; --full: 10k and 1M) holds that many live
documents, each indexed: a committed generation with one page, one section and
--live-chunks chunk rows, and one completed job. Every database also gets the same
abandoned work: --abandoned documents (indexed too) each with one abandoned generation of
one page, one section and --abandoned-chunks chunks. All of it is
seeded set-based (generate_series), with triggers off for the seeding transaction only
(foreign keys, artifact fence: the rows are valid by construction, and checked after).
Then passes of `rpc.cleanup_generations(limit=L, dry_run=False)` alternate between the
databases (one pass each in turn) until every database's passes find nothing. Printed: the
pass p50/p99/max per size and each p50 against the smallest size's (acceptance: within 2x).

Before the timed passes, passes 1..7 run in each database on one connection in a
transaction that is rolled back, with auto_explain (ANALYZE, log_nested_statements) on for
passes 1 and 7 (--explain-passes; the 7th runs the plans plpgsql settles on once it may use
generic ones): every statement of those passes (the candidate select, the deletes, and the
foreign-key actions they fire) is listed with the rows it read from documents,
index_generations, ingestion_jobs and document_chunks and any sequential scan, so a
statement that reads a whole table shows. --plans prints the plans themselves.

--mode zero: what the janitor costs when there is nothing to clean (issue 29). One database
per size in --live (default 10k and 100k; --full: 10k, 100k and 1M) holds that many live
documents, seeded as in --mode scale but with no abandoned work, each document's bytes
stored (document_sources, as an enqueue leaves them), and one completed batch per
--per-batch documents (default 100), finished a day or more ago, its counters those of its
jobs (checked). Timed, on one connection per database, round-robin over the databases,
--repeat times after --warmup untimed calls: each call run_janitor makes (expire stale
leases, refresh stuck and drifted batches, the cleanup's dry run) and the cleanup with
dry_run false, each asserted to find nothing. Printed: p50/p99/max per call and size, each
p50 against the smallest size's (acceptance: within 2x), and one call of each under
auto_explain: the rows its statements examined per table (rows returned plus rows their
filters removed), so a call that reads every document or every job shows.

--target VERSION (every mode) migrates only up to that migration (default: head).
"""

from __future__ import annotations

import argparse

from cleanup_indexing import run_indexing
from cleanup_scale import run_scale
from cleanup_zero import run_zero
from common import command_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--mode",
        choices=["indexing", "scale", "zero"],
        default="indexing",
        help="indexing: clean abandoned chunks while a worker indexes (default); scale: pass time "
        "with few vs many live documents present; zero: the janitor's calls with nothing to "
        "clean, with few vs many live documents present",
    )
    parser.add_argument(
        "--limit", type=int, default=100, help="documents per cleanup pass (default 100 = INGEST_CLEANUP_BATCH_SIZE)"
    )
    parser.add_argument(
        "--target",
        default=None,
        help="migrate only up to this migration version (default: head), e.g. 20261201000600 for "
        "the schema before migration 20261202000100",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="full size: indexing: --chunks 1000000 (its default); scale: --live 10000,1000000; "
        "zero: --live 10000,100000,1000000",
    )
    indexing = parser.add_argument_group("--mode indexing")
    indexing.add_argument("--chunks", type=int, default=1_000_000, help="abandoned chunk rows (default 1000000)")
    indexing.add_argument(
        "--chunks-per-doc", type=int, default=100, help="chunks per abandoned generation (default 100)"
    )
    indexing.add_argument(
        "--corpus-docs", type=int, default=200, help="documents the indexer keeps indexing (default 200)"
    )
    indexing.add_argument("--concurrency", type=int, default=2, help="indexer jobs in flight (default 2)")
    indexing.add_argument("--baseline-seconds", type=float, default=8, help="indexer alone before cleanup (default 8)")
    scale = parser.add_argument_group("--mode scale and --mode zero")
    scale.add_argument(
        "--live",
        default=None,
        help="live documents per database, comma-separated, smallest first (default 10000,100000)",
    )
    scale.add_argument("--live-chunks", type=int, default=1, help="chunk rows per live document (default 1)")
    scale.add_argument(
        "--abandoned",
        type=int,
        default=3000,
        help="documents with an abandoned generation, in every database (default 3000)",
    )
    scale.add_argument(
        "--abandoned-chunks", type=int, default=10, help="chunk rows per abandoned generation (default 10)"
    )
    scale.add_argument(
        "--explain-passes",
        default="1,7",
        help="passes whose plans are captured, on one connection (default 1,7: the first, and one "
        "after plpgsql may have switched to generic plans)",
    )
    scale.add_argument("--plans", action="store_true", help="also print every statement's plan (text)")
    zero = parser.add_argument_group("--mode zero")
    zero.add_argument("--per-batch", type=int, default=100, help="documents per completed batch (default 100)")
    zero.add_argument("--repeat", type=int, default=50, help="timed calls of each kind per size (default 50)")
    zero.add_argument(
        "--warmup",
        type=int,
        default=7,
        help="untimed calls of each kind first, per connection (default 7: past plpgsql's switch to generic plans)",
    )
    args = parser.parse_args()
    if args.full:
        args.chunks = 1_000_000
        args.live = args.live or ("10000,100000,1000000" if args.mode == "zero" else "10000,1000000")
    args.live = args.live or "10000,100000"

    print(f"$ {command_line()}")
    if args.mode == "scale":
        run_scale(args)
    elif args.mode == "zero":
        run_zero(args)
    else:
        run_indexing(args)


if __name__ == "__main__":
    main()
