"""Asset checks on `document_index`: the same checks (names and messages) as `ingest
health`. Run by every drain run after its materialization (`ingest_documents`), by the
`check_document_index` job (on demand, and requested by index_totals_sensor after it reports
a drain by `ingest work`), and by the janitor schedule, whose last op reports them
(`report_index_checks` in ops.py)."""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from ingestion_pipeline.health import DESCRIPTIONS, IndexCheck, run_index_checks
from ingestion_pipeline.orchestration.assets import INDEX_KEY
from ingestion_pipeline.orchestration.resources import DatabaseResource

HEALTH_CHECKS = [dg.AssetCheckKey(INDEX_KEY, name) for name in DESCRIPTIONS]


def evaluate(database: DatabaseResource) -> list[IndexCheck]:
    settings = database.settings()
    with database.rpc() as rpc:
        health = rpc.queue_health()
    return run_index_checks(database.url(), health, settings.max_pending_age_seconds, settings)


def check_metadata(check: IndexCheck) -> dict[str, Any]:
    return {"message": dg.MetadataValue.text(check.message), **check.metadata}


def severity(check: IndexCheck) -> dg.AssetCheckSeverity:
    """A warning (failed documents) fails at WARN: the asset's page shows it, nothing breaks."""
    return dg.AssetCheckSeverity.WARN if check.warning else dg.AssetCheckSeverity.ERROR


@dg.multi_asset_check(
    specs=[dg.AssetCheckSpec(name, asset=INDEX_KEY, description=text) for name, text in DESCRIPTIONS.items()],
    can_subset=True,
    description="The index checks of `ingest health`.",
)
def document_index_checks(
    context: dg.AssetCheckExecutionContext, database: DatabaseResource
) -> Iterator[dg.AssetCheckResult]:
    wanted = {key.name for key in context.selected_asset_check_keys}
    for check in evaluate(database):
        if check.name in wanted:
            yield dg.AssetCheckResult(
                check_name=check.name,
                asset_key=INDEX_KEY,
                passed=check.passed,
                severity=severity(check),
                description=check.message,
                metadata=check_metadata(check),
            )


def check_evaluations(database: DatabaseResource) -> list[dg.AssetCheckEvaluation]:
    """The same results as events an op can log (the janitor's last step)."""
    return [
        dg.AssetCheckEvaluation(
            asset_key=INDEX_KEY,
            check_name=check.name,
            passed=check.passed,
            severity=severity(check),
            description=check.message,
            metadata=check_metadata(check),
        )
        for check in evaluate(database)
    ]
