"""Registered sources (issue 32): `ingest source add|list|remove|sync`, one sync of a source
at a time (its lease), and each sync's outcome recorded on the source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.source_sync import SyncLeaseLost, SyncRefused, sync_registered
from tests.default_embedder import default_embedder  # noqa: F401 - autouse: sync, then search as users do


def run(capsys, db_url: str, *args: str, expect: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == expect, out + err
    return out, err


@pytest.fixture
def share(tmp_path) -> Path:
    (tmp_path / "share").mkdir()
    (tmp_path / "share" / "crane.txt").write_text("A crane stands in the shallow water.\n")
    (tmp_path / "share" / "ibis.txt").write_text("An ibis probes the mud.\n")
    return tmp_path / "share"


def sources(capsys, db_url) -> dict[str, dict]:
    out, _ = run(capsys, db_url, "source", "list", "--json")
    return {source["name"]: source for source in json.loads(out)}


def test_add_list_sync_and_remove(db_url, share, capsys):
    run(capsys, db_url, "source", "add", "share", str(share), "--collection", "birds", "--every", "15")
    listed = sources(capsys, db_url)["share"]
    assert (listed["url"], listed["collection"], listed["every_minutes"], listed["last_status"]) == (
        str(share),
        "birds",
        15,
        None,
    )
    assert listed["due"]  # never synced

    out, _ = run(capsys, db_url, "source", "sync", "share", "--json")
    assert json.loads(out)["counts"]["new"] == 2
    synced = sources(capsys, db_url)["share"]
    assert synced["last_status"] == "succeeded" and synced["last_counts"]["new"] == 2
    assert not synced["due"] and not synced["syncing"]

    _, err = run(capsys, db_url, "source", "add", "share", str(share), expect=1)
    assert "a source of this name exists" in err
    _, err = run(capsys, db_url, "source", "add", "no spaces", str(share), expect=1)
    assert "not added: invalid" in err
    run(capsys, db_url, "source", "remove", "share")
    assert sources(capsys, db_url) == {}
    _, err = run(capsys, db_url, "source", "remove", "share", expect=1)
    assert err == "ingest: error: no registered source 'share' (ingest source list)\n"


def test_a_failed_listing_is_recorded_and_releases_the_source(db_url, tmp_path, capsys):
    run(capsys, db_url, "source", "add", "gone", str(tmp_path / "not-there"))
    _, err = run(capsys, db_url, "source", "sync", "gone", expect=1)
    assert "no such folder" in err and len(err.splitlines()) == 1
    failed = sources(capsys, db_url)["gone"]
    assert failed["last_status"] == "failed" and "no such folder" in failed["last_error"]
    assert not failed["syncing"]


def test_a_second_sync_is_refused_while_one_holds_the_source(pool, db_url, share, capsys):
    rpc = IngestionRpc(pool)
    assert rpc.register_source("share", str(share), collection="birds").ok
    held = rpc.begin_source_sync("share", "host-a:1:held")
    assert held.ok
    _, err = run(capsys, db_url, "source", "sync", "share", expect=1)
    assert "is being synced by host-a:1:held" in err
    with pytest.raises(SyncRefused):
        sync_registered(pool, "share", max_bytes=10_000)
    assert rpc.finish_source_sync("share", held.token, succeeded=True).ok
    assert sync_registered(pool, "share", max_bytes=10_000).counts["new"] == 2


def test_a_sync_whose_lease_was_taken_over_deletes_nothing(pool, conn, share):
    """Lease timestamps moved into the past, no sleeps: sync A stalls past its lease (moved
    back while it lists), sync B takes the source; A is refused before its deletes."""
    rpc = IngestionRpc(pool)
    assert rpc.register_source("share", str(share), collection="birds").ok
    sync_registered(pool, "share", max_bytes=10_000)
    (share / "ibis.txt").unlink()  # A would delete its document
    taken: list[int] = []

    def stall_then_lose(_key: str, _counts) -> None:
        if not taken:
            conn.execute("update sync_sources set sync_expires_at = now() - interval '1 second' where name = 'share'")
            other = rpc.begin_source_sync("share", "host-b:2:took-over")
            assert other.ok
            taken.append(other.token)

    with pytest.raises(SyncLeaseLost, match="stopped where it was, deleting nothing more"):
        sync_registered(pool, "share", max_bytes=10_000, on_entry=stall_then_lose)
    assert conn.execute("select count(*) as n from documents where deleted_at is not null").fetchone()["n"] == 0
    source = {s.name: s for s in rpc.sync_sources()}["share"]
    assert source.sync_holder == "host-b:2:took-over"  # A's failure did not release B's lease
    assert rpc.finish_source_sync("share", taken[0], succeeded=True).ok
