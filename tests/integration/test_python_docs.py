"""docs/python.md is a walkthrough whose ```python blocks run here, in order, in one
namespace, as a reader runs them in a notebook: from the checkout's folder, with nothing but
DATABASE_URL set (pointing at the test's fresh database, never the user's data folder). The
namespace it leaves is then checked against what the walkthrough says happened."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from ingestion_pipeline.api import Document, EnqueueReport, Hit, RunReport, WorkerReport

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_the_walkthrough_covers_no_arguments_a_plain_connection_and_a_pool() -> None:
    """What the walkthrough must keep showing, whoever edits it: each way of opening the
    index, and enqueue, drain, search and show through the first two."""
    code = "\n".join(python_blocks())
    for needed in (
        "Index.open()",
        "psycopg.connect(",
        "Index.open(conn)",
        "Index.open(pool)",
        ".work(drain=True",
        ".run(",
    ):
        assert needed in code, f"docs/python.md no longer shows {needed}"
    no_arguments, plain = code.split("Index.open(conn)", 1)
    for call in (".enqueue(", ".work(drain=True", ".search(", ".show("):
        assert call in no_arguments, f"the walkthrough with Index.open() does not call {call}"
        assert call in plain, f"the walkthrough with a plain psycopg.connect() does not call {call}"


def test_the_walkthrough_runs(db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    for name in ("INGEST_DATABASE_URL", "INGEST_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", db_url)
    namespace: dict[str, object] = {"__name__": "python_docs"}
    for number, block in enumerate(python_blocks(), 1):
        exec(compile(block, f"docs/python.md block {number}", "exec"), namespace)  # noqa: S102 - the doc's own code

    printed = capsys.readouterr().out
    assert "no collection 'handbok'" in printed  # the UnknownCollection the doc catches and prints

    report = namespace["report"]
    assert isinstance(report, EnqueueReport)
    assert report.counts == {"new": 2}
    worked = namespace["worked"]
    assert isinstance(worked, WorkerReport)
    assert worked.counts["completed"] == 2
    assert worked.counts["failed"] == 0
    hits = namespace["hits"]
    assert isinstance(hits, list)
    assert all(isinstance(hit, Hit) for hit in hits)
    assert hits[0].title == "Leases and fencing in a PostgreSQL job queue"
    doc = namespace["doc"]
    assert isinstance(doc, Document)
    assert doc.indexed_version == 1
    assert [v.outcome for v in doc.versions] == ["indexed"]

    # With a plain psycopg.connect(): its tuple rows were left alone, and it was left open.
    assert namespace["added"].counts == {"new": 1}  # type: ignore[attr-defined]
    assert namespace["drained"].counts["completed"] == 1  # type: ignore[attr-defined]
    assert namespace["otters"][0].title == "River otters"  # type: ignore[index]
    assert namespace["shown"].indexed_version == 1  # type: ignore[attr-defined]
    assert "False" in printed.splitlines()

    # Through a pool, with run(): the changed file is version 2, indexed.
    ran = namespace["ran"]
    assert isinstance(ran, RunReport)
    assert ran.enqueued.counts == {"new_version": 1}
    assert ran.worked.counts["completed"] == 1
    assert namespace["stone"][0].title == "River otters"  # type: ignore[index]

    with psycopg.connect(db_url) as conn:
        indexed = conn.execute(
            "select count(*) from documents where deleted_at is null and index_generation_id is not null"
        ).fetchone()
    assert indexed == (3,)
