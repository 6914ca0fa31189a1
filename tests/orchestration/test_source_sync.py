"""Registered sources in Dagster (issue 32): the sensor keeps source_sync's partitions equal
to the registered sources and requests syncs of the due ones; a materialization is one sync
with its counts as metadata; a failed listing is a failed run with the one-line reason."""

from pathlib import Path

import dagster as dg
import pytest

from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.orchestration.sources import SOURCE_PARTITIONS, source_sync, sync_source_sensor


def tick(instance, resources):
    return sync_source_sensor(dg.build_sensor_context(instance=instance, resources=resources))


def apply(instance, result: dg.SensorResult) -> None:
    """What the daemon does with a tick's partition requests."""
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


@pytest.fixture
def share(tmp_path) -> Path:
    (tmp_path / "share").mkdir()
    (tmp_path / "share" / "crane.txt").write_text("A crane stands in the shallow water.\n")
    return tmp_path / "share"


def test_the_sensor_follows_the_registered_sources(instance, resources, pool, share):
    rpc = IngestionRpc(pool)
    assert isinstance(tick(instance, resources), dg.SkipReason)
    assert rpc.register_source("share", str(share), collection="birds", every_minutes=10).ok
    assert rpc.register_source("manual", str(share), collection="birds").ok  # no interval: never due

    first = tick(instance, resources)
    assert [r.partition_key for r in first.run_requests] == ["share"]
    apply(instance, first)
    assert sorted(instance.get_dynamic_partitions(SOURCE_PARTITIONS.name)) == ["manual", "share"]

    rpc.begin_source_sync("share", "test")  # a sync began: not due until its interval passes
    assert rpc.remove_source("manual").ok
    second = tick(instance, resources)
    assert second.run_requests == []
    apply(instance, second)
    assert instance.get_dynamic_partitions(SOURCE_PARTITIONS.name) == ["share"]


def test_a_materialization_is_one_sync_with_its_counts(instance, resources, pool, share):
    assert IngestionRpc(pool).register_source("share", str(share), collection="birds").ok
    instance.add_dynamic_partitions(SOURCE_PARTITIONS.name, ["share"])
    result = dg.materialize([source_sync], partition_key="share", instance=instance, resources=resources)
    assert result.success
    [materialization] = result.asset_materializations_for_node("source_sync")
    shown = {key: value.value for key, value in materialization.metadata.items()}
    assert (shown["new"], shown["unchanged"], shown["deleted"], shown["collection"]) == (1, 0, 0, "birds")


def test_a_failed_listing_fails_the_run_with_one_line(instance, resources, pool, tmp_path):
    assert IngestionRpc(pool).register_source("gone", str(tmp_path / "nowhere"), collection="birds").ok
    instance.add_dynamic_partitions(SOURCE_PARTITIONS.name, ["gone"])
    result = dg.materialize(
        [source_sync], partition_key="gone", instance=instance, resources=resources, raise_on_error=False
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    description = failure.event_specific_data.user_failure_data.description
    assert description.startswith("sync of gone failed:") and "no such folder" in description
    assert "\n" not in description


def test_a_sync_takes_the_files_its_globs_choose_and_counts_the_rest(instance, resources, pool, share):
    """Issue 61, item 2: the asset syncs what `ingest source add --include/--exclude` chose,
    and says what it passed over (`skipped`)."""
    (share / "site.css").write_text("body { color: red; }\n")
    (share / "heron.svg").write_text("<svg/>\n")
    (share / "drafts").mkdir()
    (share / "drafts" / "egret.txt").write_text("An egret, unfinished.\n")
    rpc = IngestionRpc(pool)
    assert rpc.register_source("share", str(share), collection="birds", include=["*.txt", "*.css"]).ok
    assert rpc.register_source("plain", str(share), collection="plain", exclude=["drafts/*"]).ok
    instance.add_dynamic_partitions(SOURCE_PARTITIONS.name, ["share", "plain"])
    shown = {}
    for name in ("share", "plain"):
        result = dg.materialize([source_sync], partition_key=name, instance=instance, resources=resources)
        [materialization] = result.asset_materializations_for_node("source_sync")
        shown[name] = {key: materialization.metadata[key].value for key in ("new", "skipped")}
    assert shown == {
        "share": {"new": 3, "skipped": "1 file not included"},
        "plain": {"new": 1, "skipped": "1 SVG image, 1 excluded file, 1 stylesheet"},
    }
