"""docs/grafana-dashboard.json is a dashboard Grafana imports (its datasource an input of the
import) whose panels query only series `ingest metrics` exports, and that shows every one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ingestion_pipeline.db.models import QueueMetrics
from ingestion_pipeline.metrics.queue import QueueCollector
from ingestion_pipeline.metrics.searches import search_latency
from ingestion_pipeline.search.timing import report

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
SERIES = re.compile(r"\b(ingest_[a-z_]+)\b")


class Reading:
    """One reading of the queue, for the exporter's collector (what it exports from a
    reading is the subject here, not the read, which tests/integration/test_metrics.py runs)."""

    def queue_metrics(self) -> QueueMetrics:
        return QueueMetrics(ok=True, failed_by_format={"application/pdf": 1})


def exported_series() -> dict[str, set[str]]:
    """Family name -> the sample names it exports (counters' _total, histograms' _bucket…)."""
    registry = CollectorRegistry()
    registry.register(QueueCollector(Reading()))
    stop = search_latency(registry)
    try:
        report("lexical", 0.01)
    finally:
        stop()
    text = generate_latest(registry).decode()
    return {family.name: {s.name for s in family.samples} for family in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text("utf-8"))


def expressions(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_it_is_an_importable_dashboard(dashboard):
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    [source] = dashboard["__inputs"]
    assert (source["type"], source["pluginId"]) == ("datasource", "prometheus")
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${" + source["name"] + "}", panel["title"]
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}, panel["title"]
        assert panel["targets"], panel["title"]


def test_every_query_names_exported_series_and_every_family_is_shown(dashboard):
    families = exported_series()
    samples = set().union(*families.values())
    used = {name for expr in expressions(dashboard) for name in SERIES.findall(expr)}
    assert used, "no panel queries a series of ours"
    assert used <= samples, f"series no exporter has: {sorted(used - samples)}"
    shown = {family for family, names in families.items() if names & used}
    # No panel needs: the exporter's own bookkeeping; the last minute's completions (the drain
    # rate's panels show them divided by 60); prometheus_client's creation times of a histogram.
    unshown = {"ingest_metrics_read_seconds", "ingest_jobs_completed_last_minute"}
    unshown |= {family for family in families if family.endswith("_created")}
    assert set(families) - shown <= unshown, sorted(set(families) - shown)
