"""`ingest collection add|list|grant|revoke` (issue 33): collections public or private, their
members (app users, the uuid auth.uid() returns), and the collections documents register
when they are enqueued."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import SchemaTooOld
from tests.conftest import LOCK_ORDER_NAME

ALICE = "0b6f8a52-6d3c-4c8e-9a51-2f0d3c1e7a11"
BOB = "5e2d9c70-1b4a-4f3e-8d26-7c9b0a4e6f22"
COLLECTIONS_NAME = "search_rpc_and_collections"


def run(capsys, db_url: str, *args: str, expect: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == expect, out + err
    return out, err


def said(capsys, db_url: str, *args: str, expect: int = 0) -> str:
    """The one line a command printed."""
    out, err = run(capsys, db_url, *args, expect=expect)
    assert err == "" and len(out.splitlines()) == 1, out + err
    return out.strip()


def listed(capsys, db_url: str) -> dict[str, dict]:
    out, _ = run(capsys, db_url, "collection", "list", "--json")
    return {c["name"]: c for c in json.loads(out)}


def usage_error(capsys, args: list[str]) -> str:
    """argparse's refusal: exit 2 and its message on stderr, before any database is reached."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        ingest([*args, "--database-url", "postgresql://nobody@127.0.0.1:1/never"])
    _, err = capsys.readouterr()
    assert exited.value.code == 2, err
    return err.strip().splitlines()[-1]


def enqueue(capsys, db_url: str, folder: Path, collection: str, **files: str) -> None:
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.txt").write_text(text)
    run(capsys, db_url, "enqueue", str(folder), "--collection", collection)


def test_add_creates_then_changes_only_what_it_is_told(db_url, capsys):
    assert said(capsys, db_url, "collection", "add", "team-a") == "collection team-a created (private)"
    assert said(capsys, db_url, "collection", "add", "team-a") == "collection team-a unchanged (private)"
    assert said(capsys, db_url, "collection", "add", "team-a", "--private") == "collection team-a unchanged (private)"
    assert said(capsys, db_url, "collection", "add", "team-a", "--public") == "collection team-a is now public"
    # without a flag an existing collection keeps its own
    assert said(capsys, db_url, "collection", "add", "team-a") == "collection team-a unchanged (public)"
    assert said(capsys, db_url, "collection", "add", "team-a", "--public") == "collection team-a unchanged (public)"
    assert said(capsys, db_url, "collection", "add", "team-a", "--private") == "collection team-a is now private"
    assert said(capsys, db_url, "collection", "add", "handbook", "--public") == "collection handbook created (public)"
    assert {name: c["is_public"] for name, c in listed(capsys, db_url).items()} == {
        "handbook": True,
        "team-a": False,
    }


def test_add_refuses_a_blank_name_and_both_flags(capsys):
    assert "may not be empty" in usage_error(capsys, ["collection", "add", " "])
    assert "not allowed with argument" in usage_error(capsys, ["collection", "add", "x", "--public", "--private"])


def test_list_counts_live_documents_and_members(db_url, tmp_path, capsys):
    assert said(capsys, db_url, "collection", "list") == (
        "no collection (ingest collection add NAME, or enqueue documents with --collection NAME)"
    )
    assert listed(capsys, db_url) == {}
    enqueue(capsys, db_url, tmp_path / "a", "team-a", heron="A heron waits.", egret="An egret wades.")
    enqueue(capsys, db_url, tmp_path / "b", "team-b", kite="A kite hovers.")
    run(capsys, db_url, "work", "--drain")
    said(capsys, db_url, "collection", "add", "handbook", "--public")
    said(capsys, db_url, "collection", "grant", "team-a", ALICE)
    said(capsys, db_url, "collection", "grant", "team-a", BOB, "--role", "writer")
    said(capsys, db_url, "collection", "grant", "handbook", BOB)

    collections = listed(capsys, db_url)
    counts = {name: (c["is_public"], c["documents"], c["members"]) for name, c in collections.items()}
    assert counts == {"handbook": (True, 0, 1), "team-a": (False, 2, 2), "team-b": (False, 1, 0)}
    assert set(collections["team-a"]) == {"name", "is_public", "documents", "members", "created_at"}

    out, _ = run(capsys, db_url, "collection", "list")
    header, rule, *rows = out.splitlines()
    assert header.split() == ["name", "visibility", "documents", "members", "created"]
    assert set(rule) == {"-", " "}
    assert [row.split()[:4] for row in rows] == [
        ["handbook", "public", "0", "1"],
        ["team-a", "private", "2", "2"],
        ["team-b", "private", "1", "0"],
    ]
    # aligned: each column starts where its header does
    starts = [header.index(word) for word in ("visibility", "documents", "members", "created")]
    for row in rows:
        assert all(row[start - 2 : start] == "  " and row[start] != " " for start in starts), out

    run(capsys, db_url, "delete", "--source", "heron.txt", "--collection", "team-a")
    assert listed(capsys, db_url)["team-a"]["documents"] == 1  # deleted documents are not counted


def test_documents_enqueued_into_a_new_collection_register_it_private(db_url, tmp_path, capsys):
    enqueue(capsys, db_url, tmp_path / "new", "brand-new", note="A note nobody added a collection for.")
    collection = listed(capsys, db_url)["brand-new"]
    assert (collection["is_public"], collection["documents"], collection["members"]) == (False, 1, 0)
    # it is a collection like any other: adding it changes nothing, granting works
    assert said(capsys, db_url, "collection", "add", "brand-new") == "collection brand-new unchanged (private)"
    assert (
        said(capsys, db_url, "collection", "grant", "brand-new", ALICE) == f"user {ALICE} is now a reader of brand-new"
    )


def test_grant_adds_a_member_and_changes_its_role(db_url, conn, capsys):
    said(capsys, db_url, "collection", "add", "team-a")
    assert said(capsys, db_url, "collection", "grant", "team-a", ALICE) == f"user {ALICE} is now a reader of team-a"
    assert said(capsys, db_url, "collection", "grant", "team-a", ALICE, "--role", "writer") == (
        f"user {ALICE} is now a writer of team-a (was a reader)"
    )
    assert said(capsys, db_url, "collection", "grant", "team-a", ALICE, "--role", "writer") == (
        f"user {ALICE} is already a writer of team-a"
    )
    assert said(capsys, db_url, "collection", "grant", "team-a", ALICE.upper(), "--role", "reader") == (
        f"user {ALICE} is now a reader of team-a (was a writer)"
    )
    members = conn.execute("select collection, user_id::text, role from collection_members").fetchall()
    assert [(m["collection"], m["user_id"], m["role"]) for m in members] == [("team-a", ALICE, "reader")]


def test_grant_on_an_unknown_collection_is_one_line_and_exit_1(db_url, conn, capsys):
    out, err = run(capsys, db_url, "collection", "grant", "nowhere", ALICE, expect=1)
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("ingest: error: no collection 'nowhere'") and "ingest collection add nowhere" in line
    assert conn.execute("select count(*) as n from collection_members").fetchone()["n"] == 0
    assert listed(capsys, db_url) == {}  # a grant creates no collection


@pytest.mark.parametrize("command", ["grant", "revoke"])
def test_a_user_id_that_is_not_a_uuid_is_a_usage_error(command, capsys):
    line = usage_error(capsys, ["collection", command, "team-a", "alice@example.com"])
    assert line.endswith("argument USER_ID: not a user id (a uuid, as auth.uid() returns): 'alice@example.com'")


def test_a_role_other_than_reader_or_writer_is_a_usage_error(capsys):
    line = usage_error(capsys, ["collection", "grant", "team-a", ALICE, "--role", "owner"])
    assert "argument --role: invalid choice: 'owner'" in line


def test_revoke_a_member_then_a_non_member(db_url, capsys):
    said(capsys, db_url, "collection", "add", "team-a")
    said(capsys, db_url, "collection", "grant", "team-a", ALICE, "--role", "writer")
    said(capsys, db_url, "collection", "grant", "team-a", BOB)
    assert said(capsys, db_url, "collection", "revoke", "team-a", ALICE) == (
        f"user {ALICE} is no longer a member of team-a (was a writer)"
    )
    assert listed(capsys, db_url)["team-a"]["members"] == 1
    assert said(capsys, db_url, "collection", "revoke", "team-a", ALICE, expect=1) == (
        f"user {ALICE} was not a member of team-a: nothing to revoke"
    )
    _, err = run(capsys, db_url, "collection", "revoke", "nowhere", BOB, expect=1)
    assert err.startswith("ingest: error: no collection 'nowhere': `ingest collection add nowhere` creates it")
    assert listed(capsys, db_url)["team-a"]["members"] == 1  # Bob's membership is untouched


def test_a_database_without_the_collections_is_told_to_migrate(pg_server, template_before, capsys):
    """The commands refuse a database with pending migrations (before the collections'
    migration); the client refuses the previous release's schema before its first call."""
    names = {}
    try:
        for before in (COLLECTIONS_NAME, LOCK_ORDER_NAME):
            names[before] = f"ingest_t_collections_{before[:12]}_{uuid.uuid4().hex[:8]}"
            pg_server.create_database(names[before], template=template_before(before))
        _, err = run(capsys, pg_server.url(names[COLLECTIONS_NAME]), "collection", "list", expect=1)
        assert "search_rpc_and_collections.sql: run `ingest db migrate`" in err and len(err.splitlines()) == 1

        with connect(pg_server.url(names[LOCK_ORDER_NAME])) as conn:
            rpc = IngestionRpc(conn)
            calls = (
                lambda: rpc.add_collection("team-a"),
                rpc.list_collections,
                lambda: rpc.grant_collection("team-a", uuid.UUID(ALICE)),
                lambda: rpc.revoke_collection("team-a", uuid.UUID(ALICE)),
            )
            for call in calls:
                with pytest.raises(SchemaTooOld, match=r"managing collections needs this release's schema.*migrate"):
                    call()
    finally:
        for name in names.values():
            pg_server.drop_database(name)
