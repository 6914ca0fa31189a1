"""What one bulk acknowledgement costs per item, by its size (issue 29, item 9).

For each function (`complete_ingestion_jobs`, `fail_or_retry_ingestion_jobs`) and each size
M in --sizes (default 1000, 2000, 4000, 10000): a fresh database cloned from a migrated
template, M documents with one pending job each (`common.seed_jobs`, --per-batch jobs per
import batch, counters set from the jobs), all M claimed by one `claim_ingestion_jobs` call
(so each job is `processing` under its own lease token), then ONE call of the function with
the M items (job, document and lease token each; no generation: no commit, only the
acknowledgement; fail items ask for no retry), timed from the client after a checkpoint. Printed: ms for the
call and µs per item, and each size's µs per item against the first size's (acceptance: a
10,000-item call costs at most 2x per item what a 1,000-item one does, or is refused).

A size the server refuses with SQLSTATE 22023 (the item cap) is printed "refused (22023)",
with the time the refusal took; its jobs are checked untouched (still `processing`). An
accepted call is checked: every item answered ok, every job completed (failed), every batch
counter exact.

--rounds R repeats each cell R times (a fresh database each) and prints the medians.
--target VERSION migrates the template only up to that migration (default: head), e.g.
--target 20261201000600 for the schema before migration 20261202000100.
"""

from __future__ import annotations

import argparse
import time

import psycopg
from common import (
    check_batches_completed,
    clone_database,
    command_line,
    connect,
    create_database,
    drop_database,
    embedded_server,
    machine_line,
    median,
    print_table,
    schema_version,
    seed_jobs,
    vacuum_analyze,
)
from psycopg.types.json import Jsonb

WORKER_ID = "bench-bulk-ack"

CALLS = {
    "complete_ingestion_jobs": "select complete_ingestion_jobs(p_items => %(items)s) as r",
    "fail_or_retry_ingestion_jobs": "select fail_or_retry_ingestion_jobs(p_items => %(items)s) as r",
}

# After an accepted fail call: every job failed, every batch's counters say so.
FAILED_CHECK_SQL = """
select (select count(*) from ingestion_jobs where status = 'failed') as failed_jobs,
       (select count(*) from import_batches
         where status <> 'completed_with_errors' or failed_files <> total_files or open_files <> 0
            or completed_files <> 0) as batches_wrong,
       (select coalesce(sum(total_files), 0) from import_batches) as total_files
"""


def claimed_items(conn: psycopg.Connection, size: int, function: str) -> list[dict]:
    """Claim all `size` pending jobs in one call; one acknowledgement item per job."""
    jobs = conn.execute(
        "select job_id, document_id, lease_token from claim_ingestion_jobs(p_worker_id => %s, p_claim_limit => %s)",
        (WORKER_ID, size),
    ).fetchall()
    assert len(jobs) == size, (len(jobs), size)
    items = [
        {"job_id": str(j["job_id"]), "document_id": str(j["document_id"]), "lease_token": j["lease_token"]}
        for j in jobs
    ]
    if function == "fail_or_retry_ingestion_jobs":
        for item in items:
            item.update(retry=False, stage="failed", error_message="bench: failed on purpose")
    return items


def one_cell(server_uri: str, template: str, function: str, size: int, per_batch: int) -> dict:
    """One timed call of `function` with `size` items, in a fresh database; checked."""
    name = f"bench_bulk_ack_{size}"
    uri = clone_database(server_uri, template, name)
    try:
        with connect(uri) as conn:
            seed_jobs(conn, size, per_batch=per_batch, tag=f"ack{size}")
            vacuum_analyze(conn)
            items = claimed_items(conn, size, function)
            conn.execute("checkpoint")  # the clone's and the seed's writes flushed before the timed call
            began = time.perf_counter()
            try:
                answer = conn.execute(CALLS[function], {"items": Jsonb(items)}).fetchone()["r"]
                refused = None
            except psycopg.errors.InvalidParameterValue as error:
                answer, refused = None, error.sqlstate
            seconds = time.perf_counter() - began
            if refused:
                still = conn.execute("select count(*) as n from ingestion_jobs where status = 'processing'").fetchone()[
                    "n"
                ]
                assert still == size, (function, size, still)
            else:
                results = answer["results"]
                assert len(results) == size and all(r["ok"] for r in results), (function, size, results[:3])
                if function == "complete_ingestion_jobs":
                    check_batches_completed(conn, size)
                else:
                    row = conn.execute(FAILED_CHECK_SQL).fetchone()
                    assert row == {"failed_jobs": size, "batches_wrong": 0, "total_files": size}, row
    finally:
        drop_database(server_uri, name)
    return {"seconds": seconds, "refused": refused}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes",
        default="1000,2000,4000,10000",
        help="items per call, comma-separated, smallest first (default 1000,2000,4000,10000)",
    )
    parser.add_argument("--per-batch", type=int, default=1000, help="jobs per import batch (default 1000)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="timed calls per cell, each in a fresh database (default 1); the medians are printed",
    )
    parser.add_argument("--target", default=None, help="migrate only up to this migration version (default: head)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]

    print(f"$ {command_line()}")
    started = time.perf_counter()
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        template = "bench_bulk_ack_template"
        uri = create_database(server_uri, template, migrate=True, target=args.target)
        print(f"schema: migrated up to {schema_version(uri)}")
        rows = []
        for function in CALLS:
            base = None
            for size in sizes:
                cells = [one_cell(server_uri, template, function, size, args.per_batch) for _ in range(args.rounds)]
                seconds = median([c["seconds"] for c in cells])
                refused = {c["refused"] for c in cells} - {None}
                if refused:
                    assert len(refused) == 1 and len(cells) == sum(1 for c in cells if c["refused"]), cells
                    rows.append([function, size, f"{seconds * 1000:.1f}", f"refused ({refused.pop()})", "-"])
                    continue
                per_item = seconds / size * 1e6
                base = base or per_item
                rows.append([function, size, f"{seconds * 1000:.1f}", f"{per_item:.1f}", f"{per_item / base:.2f}"])
                print(
                    f"{function} {size} items: " + ", ".join(f"{c['seconds'] * 1000:.1f}" for c in cells) + " ms",
                    flush=True,
                )
        print_table(
            f"one bulk acknowledgement call of M items (no generation, each with its lease token; "
            f"{args.per_batch} jobs per batch), fresh database per call, client-timed, "
            f"median of {args.rounds} round(s)",
            ["function", "items", "ms", "µs per item", "per item / first accepted size"],
            rows,
        )
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
