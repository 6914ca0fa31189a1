"""The plans of cleanup.py's passes and calls: auto_explain's notices of every statement they
run, read as rows examined per table (and any sequential scan)."""

from __future__ import annotations

import json

from common import connect

TABLES_READ = (
    "documents",
    "index_generations",
    "ingestion_jobs",
    "document_pages",
    "document_sections",
    "document_chunks",
)


def load_auto_explain(conn, fmt: str, notices: list[str]) -> None:
    """auto_explain on this connection: each statement's plan (nested statements too) with
    ANALYZE, as a notice appended to `notices`, once auto_explain.log_min_duration is set
    to 0 (it starts off: -1)."""
    conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    conn.execute("load 'auto_explain'")
    for setting, value in [
        ("log_nested_statements", "on"),
        ("log_analyze", "on"),
        ("log_buffers", "on"),
        ("log_timing", "on"),
        ("log_triggers", "on"),
        ("log_format", fmt),
        ("log_level", "notice"),
        ("log_min_duration", "-1"),
    ]:
        conn.execute(f"set auto_explain.{setting} = {value}")


def explain_passes(uri: str, args, fmt: str) -> dict[int, list[str]]:
    """The passes numbered in --explain-passes, run on one connection in one transaction
    that is rolled back, every statement's plan captured with auto_explain (nested
    statements included: the pass's own and the foreign-key actions they fire). A later
    pass shows the plan a long cleanup settles on: plpgsql caches its statements' plans,
    and after five runs may switch to a generic plan."""
    from ingestion_pipeline.db.rpc import IngestionRpc

    wanted = sorted({int(n) for n in args.explain_passes.split(",")})
    notices: list[str] = []
    plans: dict[int, list[str]] = {}
    with connect(uri) as conn:
        load_auto_explain(conn, fmt, notices)
        rpc = IngestionRpc(conn)
        with conn.transaction(force_rollback=True):
            for number in range(1, wanted[-1] + 1):
                conn.execute(f"set auto_explain.log_min_duration = {0 if number in wanted else -1}")
                notices.clear()
                rpc.cleanup_generations(limit=args.limit, dry_run=False)
                if number in wanted:
                    plans[number] = [n for n in notices if "plan:" in n]
    return plans


def plan_reads(notice: str, tables: tuple[str, ...] = TABLES_READ) -> dict:
    """From one auto_explain JSON notice: the statement, its time, the rows its plan nodes
    read from each table (actual rows x loops), the rows they examined (those plus the rows
    their filters and rechecks removed, x loops: EXPLAIN shows removals per loop), the
    tables its plan scans sequentially and, of those, the ones a scan of which ran."""
    plan = json.loads(notice.split("plan:", 1)[1])
    reads = dict.fromkeys(tables, 0)
    examined = dict.fromkeys(tables, 0)
    seq: set[str] = set()
    seq_run: set[str] = set()

    def walk(node: dict) -> None:
        relation = node.get("Relation Name")
        if node.get("Node Type") == "Seq Scan" and relation and node.get("Actual Loops", 1) > 0:
            seq_run.add(relation)
        if relation in reads:
            loops = node.get("Actual Loops", 1)
            reads[relation] += int(node.get("Actual Rows", 0) * loops)
            examined[relation] += int(
                (
                    node.get("Actual Rows", 0)
                    + node.get("Rows Removed by Filter", 0)
                    + node.get("Rows Removed by Index Recheck", 0)
                )
                * loops
            )
            if node.get("Node Type") == "Seq Scan":
                seq.add(relation)
        elif node.get("Node Type") == "Seq Scan" and relation:
            seq.add(relation)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    text = " ".join(plan.get("Query Text", "").split())
    return {
        "query": text,
        "ms": plan.get("Execution Time", plan["Plan"].get("Actual Total Time", 0.0)),
        "reads": reads,
        "examined": examined,
        "seq": sorted(seq),
        "seq_run": sorted(seq_run),
    }


def statement_label(text: str) -> str:
    """A short name for a statement of the pass (or of a foreign-key action it fired)."""
    lowered = text.lower()
    if lowered.startswith("select coalesce(array_agg(candidate"):
        return "candidates (select distinct ... limit)"
    if lowered.startswith("delete from public."):
        return "delete " + lowered.split()[2].removeprefix("public.")
    if "ri_constraint" in lowered or lowered.startswith(("update only", "delete from only", "select 1 from only")):
        return "FK: " + " ".join(text.split()[:5])
    return " ".join(text.split()[:6])
