"""`cleanup.py --mode zero`: the janitor's calls when there is nothing to clean, timed at
each size of live documents, and the rows one call of each examines."""

from __future__ import annotations

import time

from cleanup_plans import load_auto_explain, plan_reads
from cleanup_scale import seed_scale
from common import (
    clone_database,
    connect,
    create_database,
    embedded_server,
    machine_line,
    ms,
    percentile,
    print_table,
    schema_version,
)

# -- --mode zero ----------------------------------------------------------------------------

# The janitor's calls when there is nothing to do (run_janitor: expire, stuck, drifted, then
# the cleanup's dry run, which finds nothing and stops), and the cleanup itself with nothing
# to delete. Each: its SQL, and the answer's key that must be 0.
ZERO_CALLS = {
    "expire_stale_ingestion_jobs(300)": (
        "select expire_stale_ingestion_jobs(p_stale_after_seconds => 300) as r",
        "expired",
    ),
    "refresh_stuck_import_batches(L)": ("select refresh_stuck_import_batches(p_limit => %(limit)s) as r", "refreshed"),
    "refresh_drifted_import_batches(L)": (
        "select refresh_drifted_import_batches(p_limit => %(limit)s) as r",
        "refreshed",
    ),
    "cleanup(L, dry run)": (
        "select cleanup_abandoned_document_index_generations(p_limit => %(limit)s, p_dry_run => true) as r",
        "documents",
    ),
    "cleanup(L, not dry run)": (
        "select cleanup_abandoned_document_index_generations(p_limit => %(limit)s, p_dry_run => false) as r",
        "documents",
    ),
}
JANITOR_PASS = (
    "expire_stale_ingestion_jobs(300)",
    "refresh_stuck_import_batches(L)",
    "refresh_drifted_import_batches(L)",
    "cleanup(L, dry run)",
)
ZERO_TABLES = ("documents", "index_generations", "ingestion_jobs", "import_batches", "document_sources")


def zero_call(conn, name: str, limit: int) -> float:
    """One call of ZERO_CALLS[name]; its seconds. Asserts that it found nothing."""
    sql, key = ZERO_CALLS[name]
    began = time.perf_counter()
    answer = conn.execute(sql, {"limit": limit}).fetchone()["r"]
    elapsed = time.perf_counter() - began
    assert answer["ok"] and answer[key] == 0, (name, answer)
    return elapsed


def explain_zero_calls(uri: str, limit: int, warmup: int) -> dict[str, dict]:
    """Each call of ZERO_CALLS on one connection in a transaction that is rolled back:
    `warmup` runs unlogged (plpgsql may settle on generic plans), then one with auto_explain
    (ANALYZE, nested statements). Per call: its time and, summed over its nested statements,
    the rows examined per table and the tables scanned sequentially."""
    notices: list[str] = []
    facts: dict[str, dict] = {}
    with connect(uri) as conn:
        load_auto_explain(conn, "json", notices)
        with conn.transaction(force_rollback=True):
            for name in ZERO_CALLS:
                for _ in range(warmup):
                    zero_call(conn, name, limit)
                conn.execute("set auto_explain.log_min_duration = 0")
                notices.clear()
                zero_call(conn, name, limit)
                conn.execute("set auto_explain.log_min_duration = -1")
                # auto_explain logs a statement when it ends: the call itself comes last
                *nested, top = [plan_reads(n, ZERO_TABLES) for n in notices if "plan:" in n]
                seen = {
                    "ms": top["ms"],
                    "statements": len(nested),
                    "seq": set(),
                    "examined": dict.fromkeys(ZERO_TABLES, 0),
                }
                for read in nested:
                    seen["seq"] |= set(read["seq_run"])
                    for table in ZERO_TABLES:
                        seen["examined"][table] += read["examined"][table]
                facts[name] = seen
    return facts


def run_zero(args) -> None:
    sizes = [int(n) for n in args.live.split(",")]
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        template = "bench_cleanup_zero_template"
        print(
            f"schema: migrated up to "
            f"{schema_version(create_database(server_uri, template, migrate=True, target=args.target))}"
        )
        uris, seeds = {}, {}
        for live in sizes:
            uris[live] = clone_database(server_uri, template, f"bench_cleanup_zero_{live}")
            seeds[live] = seed_scale(
                uris[live],
                live,
                abandoned=0,
                live_chunks=args.live_chunks,
                abandoned_chunks=0,
                per_batch=args.per_batch,
                sources=True,
            )
            print(
                f"seeded {live} live documents (with their bytes), {seeds[live]['batches']} completed batches "
                f"({args.per_batch} documents each), nothing to clean, in {seeds[live]['seconds']:.1f}s",
                flush=True,
            )

        facts = {live: explain_zero_calls(uris[live], args.limit, args.warmup) for live in sizes}

        # The timed calls: one connection per database (as a janitor keeps one), round-robin
        # over the databases, the first --warmup rounds untimed.
        times = {live: {name: [] for name in ZERO_CALLS} for live in sizes}
        conns = {live: connect(uris[live]) for live in sizes}
        try:
            for round_ in range(args.warmup + args.repeat):
                for live in sizes:
                    for name in ZERO_CALLS:
                        elapsed = zero_call(conns[live], name, args.limit)
                        if round_ >= args.warmup:
                            times[live][name].append(elapsed)
        finally:
            for conn in conns.values():
                conn.close()
        for live in sizes:
            times[live]["janitor pass: the first four"] = [
                sum(parts) for parts in zip(*(times[live][name] for name in JANITOR_PASS), strict=True)
            ]

        rows = []
        for name in times[sizes[0]]:
            base = percentile(times[sizes[0]][name], 50)
            for live in sizes:
                t = times[live][name]
                rows.append(
                    [
                        name,
                        live,
                        seeds[live]["batches"],
                        len(t),
                        ms(percentile(t, 50)),
                        ms(percentile(t, 99)),
                        ms(max(t)),
                        f"{percentile(t, 50) / base:.2f}",
                    ]
                )
        print_table(
            f"the janitor with nothing to clean: N live indexed documents (one completed job each, "
            f"{args.per_batch} per completed batch), 0 candidates, L={args.limit}; {args.repeat} timed calls "
            f"each after {args.warmup} untimed, round-robin over the databases",
            ["call", "live documents", "batches", "calls", "p50 ms", "p99 ms", "max ms", f"p50 / {sizes[0]}"],
            rows,
        )
        print_table(
            f"plans of one call each (auto_explain, ANALYZE, after {args.warmup} untimed calls on the "
            "connection, rolled back): rows examined per table over the call's nested statements "
            "(actual rows + rows removed by filter or recheck, x loops) and the sequential scans that ran",
            ["call", "live documents", "ms (analyze)", "statements", *[f"{t} rows" for t in ZERO_TABLES], "seq scans"],
            [
                [
                    name,
                    live,
                    f"{facts[live][name]['ms']:.2f}",
                    facts[live][name]["statements"],
                    *[facts[live][name]["examined"][t] for t in ZERO_TABLES],
                    ",".join(sorted(facts[live][name]["seq"])) or "-",
                ]
                for name in ZERO_CALLS
                for live in sizes
            ],
        )
