"""Removing a collection waits for enqueues into that collection only (issue 58, defect 6;
migration …_remove_collection_locks_its_name.sql). Before it, remove_collection locked the
whole documents table in SHARE mode: with an enqueue open in collection `a`, removing the
empty collection `typo` queued behind it, and an enqueue into `b` queued behind the removal.

Interleavings are forced with a transaction held open on another connection and observed
through pg_blocking_pids; no sleep decides an ordering."""

from __future__ import annotations

import psycopg

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.sources import enqueue_content
from tests.helpers import Background, backend_pid, wait_until_blocked


def enqueue(conn: psycopg.Connection, collection: str, name: str) -> None:
    enqueue_content(
        conn, f"A {name} waits.".encode(), source_key=f"app://{name}", source_name=name, collection=collection
    )


def enqueue_and_commit(conn: psycopg.Connection, collection: str, name: str) -> None:
    with conn.transaction():
        enqueue(conn, collection, name)


def test_removing_an_empty_collection_waits_for_no_enqueue_into_another(collection_lock_schema):
    url = collection_lock_schema.url
    with connect(url) as conn, connect(url) as writer, connect(url) as remover, connect(url) as other:
        IngestionRpc(conn).add_collection("typo")
        remover_pid, other_pid = backend_pid(remover), backend_pid(other)
        with writer.transaction():
            enqueue(writer, "a", "heron")  # open: its transaction holds its locks
            removal = Background(lambda: IngestionRpc(remover).remove_collection("typo"))
            if collection_lock_schema.hardened:
                assert removal.join().ok  # at once: nothing of `typo` is open
                enqueue_and_commit(other, "b", "egret")
            else:  # the bug: the removal waits for `a`, and an enqueue into `b` for the removal
                wait_until_blocked(conn, remover_pid, by=backend_pid(writer))
                enqueuing = Background(lambda: enqueue_and_commit(other, "b", "egret"))
                wait_until_blocked(conn, other_pid, by=remover_pid)
        if not collection_lock_schema.hardened:
            assert removal.join().ok
            enqueuing.join()
    with connect(url) as conn:
        names = [row["name"] for row in conn.execute("select name from collections order by name")]
    assert "typo" not in names and {"a", "b"} <= set(names)
