"""The plans of what a statement actually runs, nested statements included (the queries
inside plpgsql and SQL functions), from auto_explain sent to this client as notices.

auto_explain is loaded into this session only (LOAD, as a superuser), logs every statement
with its plan in JSON at level WARNING, and the connection's notice handler keeps them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

SETTINGS = {
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_nested_statements": "on",
    "auto_explain.log_format": "json",
    # warning: the search functions set client_min_messages = warning for their callers
    "auto_explain.log_level": "warning",
}


@contextmanager
def captured_plans(conn: psycopg.Connection) -> Iterator[list[dict]]:
    """Within the block, each statement's plan (its "Plan" node) is appended to the list.
    Entered as a superuser (LOAD); a SET ROLE inside the block keeps the plans coming."""
    plans: list[dict] = []

    def keep(diag: psycopg.errors.Diagnostic) -> None:
        message = diag.message_primary or ""
        if "plan:" in message:
            plans.append(json.loads(message.split("plan:", 1)[1])["Plan"])

    conn.execute("load 'auto_explain'")
    for name, value in SETTINGS.items():
        conn.execute("select set_config(%s, %s, false)", (name, value))
    conn.add_notice_handler(keep)
    try:
        yield plans
    finally:
        conn.remove_notice_handler(keep)
        conn.execute("select set_config('auto_explain.log_min_duration', '-1', false)")


def nodes(plan: dict) -> Iterator[dict]:
    """Every node of a plan tree (InitPlans and SubPlans included)."""
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def scans_of(plans: list[dict], relation: str) -> list[tuple[str, str | None]]:
    """(node type, index name) of every scan of `relation` in `plans`, a bitmap heap scan's
    index scans under it included (they name the index only)."""
    scans: list[tuple[str, str | None]] = []
    for plan in plans:
        for node in nodes(plan):
            if node.get("Relation Name") != relation:
                continue
            scans.append((node["Node Type"], node.get("Index Name")))
            if node["Node Type"] == "Bitmap Heap Scan":
                scans += [(child["Node Type"], child["Index Name"]) for child in nodes(node) if "Index Name" in child]
    return scans
