"""Passages and evidence (issue 60, migration 20261206000900), with the embedder users get by
default (wordllama: tests/search/conftest.py): `ingest search --passages` returns the best
chunks, several of one document when they are the best, with a window on request; a search
with no evidence says `no results` instead of listing filler."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from psycopg.errors import InvalidParameterValue

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from tests.readme import ROOT, tour_examples

# A manual of distinct sections, each a chunk or more: several passages of one document
# answer a query about two of them.
SECTIONS = {
    "Kettles": "A copper kettle heats water slowly and evenly on a wood stove; descale it with vinegar.",
    "Lanterns": "A storm lantern burns paraffin behind glass; trim the wick before lighting it at dusk.",
    "Ropes": "A hemp rope swells when wet; coil it loosely and hang it to dry away from the sun.",
    "Boats": "A rowing boat is caulked with oakum and tar each spring before it goes back to the water.",
    "Nets": "A fishing net is mended with a netting needle, one mesh at a time, knot over knot.",
}


def run(capsys, db_url: str, *args: str, expect: int = 0) -> str:
    capsys.readouterr()
    code = ingest([*args, "--database-url", db_url])
    out, err = capsys.readouterr()
    assert code == expect, out + err
    return out


@pytest.fixture
def indexed(db_url, tmp_path, capsys) -> Path:
    """The samples and the manual, indexed with the default embedder."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for sample in (ROOT / "samples").iterdir():
        (folder / sample.name).write_bytes(sample.read_bytes())
    manual = "\n\n".join(f"## {title}\n\n" + " ".join([text] * 12) for title, text in SECTIONS.items())
    (folder / "manual.md").write_text(f"# Keeping a boathouse\n\n{manual}\n")
    run(capsys, db_url, "enqueue", str(folder))
    run(capsys, db_url, "work", "--drain")
    return folder


def test_passages_are_the_best_chunks_several_of_one_document(indexed, db_url, capsys):
    shown = json.loads(run(capsys, db_url, "search", "lantern wick paraffin rope coil", "--passages", "--json"))
    manual = [p for p in shown if p["source_name"] == "manual.md"]
    assert len(manual) >= 2, shown  # two sections answer: two passages of one document
    assert {p["heading"] for p in manual[:2]} == {"Lanterns", "Ropes"}
    assert all("paraffin" in p["content"] or "rope" in p["content"] for p in manual[:2])
    assert [p["score"] for p in shown] == sorted((p["score"] for p in shown), reverse=True)
    # one hit per document stays what `ingest search` prints
    hits = json.loads(run(capsys, db_url, "search", "lantern wick paraffin rope coil", "--json"))
    assert len({h["document_id"] for h in hits}) == len(hits)


def test_a_window_gives_the_chunks_around_a_passage_in_order(indexed, db_url, capsys):
    [alone] = json.loads(run(capsys, db_url, "search", "oakum tar caulked", "--passages", "--limit", "1", "--json"))
    [wide] = json.loads(
        run(capsys, db_url, "search", "oakum tar caulked", "--passages", "--limit", "1", "--window", "1", "--json")
    )
    assert alone["context"] == alone["content"] and "oakum" in alone["content"]
    assert wide["chunk_ordinal"] == alone["chunk_ordinal"]
    before, passage = wide["context"].split(alone["content"])[0], alone["content"]
    assert passage in wide["context"] and len(wide["context"]) > len(passage)
    assert "Ropes" in before or "rope" in before  # the section before it comes first
    capsys.readouterr()
    assert ingest(["search", "oakum", "--window", "1", "--database-url", db_url]) == 1
    assert capsys.readouterr().err == (
        "ingest: error: --window N goes with --passages: it adds the chunks around each passage\n"
    )


def test_a_search_without_evidence_says_no_results(indexed, db_url, capsys):
    """The issue's filler: an unrelated query listed every document at a cosine near 0."""
    assert run(capsys, db_url, "search", "lease fencing").count("\n") == 2  # one hit: its line and snippet
    assert run(capsys, db_url, "search", "quantum chromodynamics lattice") == "no results\n"
    assert json.loads(run(capsys, db_url, "search", "quantum chromodynamics lattice", "--json")) == []
    assert run(capsys, db_url, "search", "quantum chromodynamics lattice", "--passages") == "no results\n"
    # the tea notes deleted: their words find nothing else
    run(capsys, db_url, "delete", str(indexed / "tea-notes.txt"))
    assert run(capsys, db_url, "search", "green tea") == "no results\n"
    assert run(capsys, db_url, "search", "green tea", "--mode", "vector") == "no results\n"


def test_an_app_reader_gets_only_the_passages_it_may_read(indexed, db_url, capsys):
    with connect(db_url) as conn:
        conn.execute("select add_collection('open', true)")
    folder = indexed.parent / "open"
    folder.mkdir()
    (folder / "harbour.md").write_text("# Harbour\n\nThe harbour lantern is lit at dusk by the harbour master.\n")
    run(capsys, db_url, "enqueue", str(folder), "--collection", "open")
    run(capsys, db_url, "work", "--drain")
    owner = json.loads(run(capsys, db_url, "search", "lantern dusk", "--passages", "--json"))
    anon = json.loads(run(capsys, db_url, "search", "lantern dusk", "--passages", "--as-anon", "--json"))
    assert {p["collection"] for p in owner} == {"default", "open"}
    assert {p["collection"] for p in anon} == {"open"}
    # vector mode's candidates are the chunks most like the query (search_vector_passages)
    owner = json.loads(run(capsys, db_url, "search", "lantern dusk", "--passages", "--mode", "vector", "--json"))
    anon = json.loads(
        run(capsys, db_url, "search", "lantern dusk", "--passages", "--mode", "vector", "--as-anon", "--json")
    )
    assert {p["collection"] for p in owner} == {"default", "open"}
    assert {p["collection"] for p in anon} == {"open"}


def test_the_rpc_refuses_a_bad_window_in_one_line(indexed, db_url):
    with connect(db_url) as conn, pytest.raises(InvalidParameterValue, match="p_window must be between 0 and 3, got 4"):
        conn.execute("select * from search_passages('lantern', null, 'lexical', 5, null, null, 4)")


def test_the_readmes_search_examples_show_the_real_output(db_url, tmp_path, capsys):
    run(capsys, db_url, "enqueue", str(ROOT / "samples"))
    run(capsys, db_url, "work", "--drain")
    examples = [e for e in tour_examples(["search"]) if "--as-user" not in e[0]]  # not an app user's: no grants here
    assert len(examples) == 3
    for args, shown in examples:
        out = run(capsys, db_url, *args).replace(f"file://{ROOT}/", "file:///…/").splitlines()
        if shown[-1].strip() == "…":
            shown, out = shown[:-1], out[: len(shown) - 1]
        assert len(out) == len(shown), (args, out)
        for got, expected in zip(out, shown, strict=True):
            score = re.match(r"(\d\.\d{3})  ", expected)
            if score:  # the third decimal may differ between pgvector and the exact path
                assert abs(float(got[:5]) - float(score.group(1))) <= 0.002, (args, got)
                got, expected = got[5:], expected[5:]
            assert got == expected, args
