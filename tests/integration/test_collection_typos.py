"""A typo does not create a collection, and an unknown name is answered with the near ones
(issue 61, item 3): a write into a new collection named a small edit from an existing one
(`kitchn` beside `kitchen`) is refused with the near names, nothing written, unless the new
name is confirmed (`--new-collection`, `new_collection=True`); every unknown-name error (the
commands, the Python API, the retrievers, the MCP tools) names the closest collections the
caller may read, and a reader is never told of one it may not read."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest

from ingestion_pipeline.api import Index, NearCollection, Reader, UnknownCollection
from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError, near_names, typo_of
from ingestion_pipeline.integrations import langchain as lc
from ingestion_pipeline.integrations import llama_index as li
from ingestion_pipeline.integrations.mcp_server import Scope, Tools


def run(capsys, db_url: str, *args: str, expect: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == expect, out + err
    return out, err


def collections(capsys, db_url: str) -> list[str]:
    out, _ = run(capsys, db_url, "collection", "list", "--json")
    return [c["name"] for c in json.loads(out)]


@pytest.fixture
def kitchen(db_url, tmp_path, capsys) -> Path:
    """Collections `kitchen` (one document, indexed) and `pgdocs` (empty)."""
    note = tmp_path / "tea.txt"
    note.write_text("Steep green tea for two minutes.\n")
    run(capsys, db_url, "enqueue", str(note), "--collection", "kitchen")
    run(capsys, db_url, "collection", "add", "pgdocs")
    run(capsys, db_url, "work", "--drain")
    return tmp_path


def test_near_names_and_likely_typos() -> None:
    existing = ["kitchen", "pgdocs", "team-a", "tenant-01", "handbook"]
    assert typo_of("kitchn", existing) == ["kitchen"]
    assert typo_of("Kitchen", existing) == ["kitchen"]  # a change of case is a typo too
    assert typo_of("pgdoc", existing) == ["pgdocs"]
    # meant, not typos: far names, another letter after a dash, another number
    assert typo_of("garden", existing) == typo_of("team-b", existing) == typo_of("tenant-02", existing) == []
    assert typo_of("tenant-b", ["tenant-a"]) == typo_of("pgdocs2", ["pgdocs"]) == []
    assert typo_of("tenant-bb", ["tenant-b"]) == ["tenant-b"]
    assert near_names("pgdoc", existing) == ["pgdocs"]
    assert near_names("handbok", existing) == ["handbook"]
    assert near_names("zzz", existing) == []


def test_an_enqueue_into_a_near_name_is_refused_until_confirmed(kitchen, db_url, capsys):
    note = kitchen / "soup.txt"
    note.write_text("Simmer the soup slowly.\n")
    out, err = run(capsys, db_url, "enqueue", str(note), "--collection", "kitchn", expect=1)
    assert out == ""
    assert err.splitlines() == [
        "ingest: error: no collection 'kitchn': did you mean 'kitchen'? Nothing was written; to create 'kitchn', "
        "confirm it (--new-collection; new_collection=True in Python)"
    ]
    status, _ = run(capsys, db_url, "status", "--json")
    assert len(json.loads(status)["batches"]) == 1  # the fixture's only
    assert collections(capsys, db_url) == ["kitchen", "pgdocs"]
    # the same for a sync and a registered source, which its first sync would create
    for command in (["sync", str(kitchen)], ["source", "add", "notes", str(kitchen)]):
        _, err = run(capsys, db_url, *command, "--collection", "kitchn", expect=1)
        assert "did you mean 'kitchen'?" in err
    out, _ = run(capsys, db_url, "source", "list", "--json")
    assert json.loads(out) == []
    # confirmed, it is created and said; a far name needs no confirmation
    _, err = run(capsys, db_url, "enqueue", str(note), "--collection", "kitchn", "--new-collection")
    assert err.splitlines() == ["ingest: created collection 'kitchn'"]
    _, err = run(capsys, db_url, "enqueue", str(note), "--collection", "garden")
    assert err.splitlines() == ["ingest: created collection 'garden'"]
    # an existing name is never refused, even beside a near one
    run(capsys, db_url, "enqueue", str(note), "--collection", "kitchen")


def test_the_python_api_refuses_a_near_name_until_confirmed(kitchen, db_url):
    note = kitchen / "bread.txt"
    note.write_text("Knead the dough for ten minutes.\n")
    with Index.open(db_url) as index:
        for write in (
            lambda confirmed: index.enqueue(note, collection="kitchn", new_collection=confirmed),
            lambda confirmed: index.run([note], collection="kitchn", new_collection=confirmed),
            lambda confirmed: index.sync(kitchen, collection="kitchn", new_collection=confirmed),
            lambda confirmed: index.enqueue_bytes(b"rye", key="app://r", collection="kitchn", new_collection=confirmed),
        ):
            with pytest.raises(NearCollection, match=r"^no collection 'kitchn': did you mean 'kitchen'\?") as refused:
                write(False)
            assert refused.value.near == ["kitchen"]
        with psycopg.connect(db_url) as conn:
            assert IngestionRpc(conn).missing_collections(["kitchn"]) == ["kitchn"]
            assert index.enqueue(note, collection="kitchn", new_collection=True).counts == {"new": 1}
            assert IngestionRpc(conn).missing_collections(["kitchn"]) == []


@pytest.mark.parametrize(
    "command",
    [
        ["search", "tea", "--collection", "pgdoc"],
        ["search", "tea", "--collection", "kitchen", "--collection", "pgdoc", "--json"],
        ["status", "--collection", "pgdoc"],
        ["reindex", "--all", "--collection", "pgdoc"],
        ["collection", "grant", "pgdoc", str(uuid4())],
        ["collection", "revoke", "pgdoc", str(uuid4())],
        ["collection", "remove", "pgdoc"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_an_unknown_name_names_the_closest_collections(kitchen, db_url, capsys, command):
    out, err = run(capsys, db_url, *command, expect=1)
    assert out == ""
    assert err.splitlines() == [
        "ingest: error: no collection 'pgdoc': did you mean 'pgdocs'? (`ingest collection add pgdoc` creates it)"
    ]


def test_suggestions_come_only_from_what_the_caller_may_read(kitchen, db_url):
    """A reader is told of the near collections it may read, never of a private one: to it a
    private name and an absent one get the same answer."""
    member = Reader(uuid4())
    with psycopg.connect(db_url) as conn:
        rpc = IngestionRpc(conn)
        assert rpc.add_collection("pgdocz").outcome == "created"  # private, near 'pgdoc'
        rpc.add_collection("pgdocs", public=True)
        assert member.user_id is not None and rpc.grant_collection("kitchen", member.user_id).ok
    with Index.open(db_url) as index:
        with pytest.raises(UnknownCollection) as owner:
            index.search("tea", mode="lexical", collections="pgdoc")
        assert owner.value.near == ["pgdocs", "pgdocz"]
        for reader in (Reader(), member):
            answers = {}
            for name in ("pgdoc", "pgdocz", "pgdocx"):
                with pytest.raises(UnknownCollection) as refused:
                    index.search("tea", mode="lexical", collections=name, reader=reader)
                answers[name] = str(refused.value)
            assert answers == {name: f"no collection {name!r}: did you mean 'pgdocs'?" for name in answers}
        # a member's own private collection is suggested to it, and to no one else
        with pytest.raises(UnknownCollection, match=r"^no collection 'kitchn': did you mean 'kitchen'\?$"):
            index.search("tea", mode="lexical", collections="kitchn", reader=member)
        with pytest.raises(UnknownCollection, match=r"^no collection 'kitchn'$"):
            index.search("tea", mode="lexical", collections="kitchn", reader=Reader())

        # the retrievers and the MCP tools answer the same, with the same scope
        anon = {"index": index, "mode": "lexical", "reader": Reader(), "collections": "pgdocz"}
        for retrieve in (
            lambda: li.IngestionRetriever(**anon).retrieve("tea"),
            lambda: lc.IngestionRetriever(**anon).invoke("tea"),
        ):
            with pytest.raises(IngestError) as refused:
                retrieve()
            assert str(refused.value) == "no collection 'pgdocz': did you mean 'pgdocs'?"
        tools = Tools(index, Scope(reader=Reader()))
        for call in (
            lambda: tools.search("tea", "lexical", 5, ["pgdocz"]),
            lambda: tools.status("pgdocz"),
        ):
            with pytest.raises(UnknownCollection) as refused:
                call()
            assert str(refused.value) == "no collection 'pgdocz': did you mean 'pgdocs'?"
        owners = Tools(index, Scope())
        with pytest.raises(UnknownCollection, match="did you mean 'kitchen'"):
            owners.status("kitchn")
