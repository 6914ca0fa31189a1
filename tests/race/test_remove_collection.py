"""`remove_collection` against an enqueue into the same collection (migration
…_remove_collection.sql), at head: a document enqueued while its collection is removed
never ends in a collection without a row. Either the removal counts it (and refuses), or
the enqueue registers the collection again after the removal.

Interleavings are forced with a transaction held open on another connection and observed
through pg_blocking_pids; no sleep decides an ordering."""

from __future__ import annotations

import psycopg

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.sources import enqueue_content
from tests.helpers import Background, backend_pid, wait_until_blocked


def enqueue(conn: psycopg.Connection, name: str) -> None:
    enqueue_content(conn, b"A heron waits.", source_key=f"app://{name}", source_name=name, collection="birds")


def names(conn: psycopg.Connection) -> list[str]:
    return [row["name"] for row in conn.execute("select name from collections order by name")]


def test_a_removal_waits_for_an_enqueue_in_flight_and_counts_its_document(db_url, conn):
    with connect(db_url) as writer, connect(db_url) as remover:
        IngestionRpc(conn).add_collection("birds")
        with writer.transaction():
            enqueue(writer, "heron")  # uncommitted: invisible to the removal's snapshot
            remover_pid = backend_pid(remover)
            removal = Background(lambda: IngestionRpc(remover).remove_collection("birds"))
            wait_until_blocked(conn, remover_pid, by=backend_pid(writer))
        result = removal.join()
    assert (result.ok, result.reason, result.documents) == (False, "not_empty", 1)
    assert names(conn) == ["birds"]


def test_an_enqueue_during_a_removal_registers_the_collection_again(db_url, conn):
    with connect(db_url) as writer, connect(db_url) as remover:
        IngestionRpc(conn).add_collection("birds")
        with remover.transaction():
            assert IngestionRpc(remover).remove_collection("birds").ok  # uncommitted, its locks held
            writer_pid = backend_pid(writer)

            def enqueue_and_commit() -> None:
                with writer.transaction():
                    enqueue(writer, "egret")

            enqueuing = Background(enqueue_and_commit)
            wait_until_blocked(conn, writer_pid, by=backend_pid(remover))
        enqueuing.join()
    assert names(conn) == ["birds"]  # the egret's collection has its row
    assert conn.execute("select count(*) as n from documents where collection = 'birds'").fetchone()["n"] == 1
