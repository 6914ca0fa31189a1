"""docs/integrations.md runs here as a reader runs it: its `ingest` lines (the bash blocks'
commands, in process), then its ```python blocks in order in one namespace, from the
checkout's folder with nothing but DATABASE_URL set (the test's fresh database). What they
printed and left behind is then checked against what the page says happens."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"
BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(DOC.read_text(encoding="utf-8")) if lang == language]


def ingest_lines() -> list[list[str]]:
    return [
        shlex.split(line)[1:] for block in blocks("bash") for line in block.splitlines() if line.startswith("ingest ")
    ]


def test_the_page_covers_both_frameworks_a_reader_and_no_arguments() -> None:
    code = "\n".join(blocks("python"))
    for needed in ("RetrieverQueryEngine.from_args(", "RunnableParallel(", "Reader(", "IngestionRetriever(top_k=3)"):
        assert needed in code, f"docs/integrations.md no longer shows {needed}"
    assert [args[0] for args in ingest_lines()] == ["enqueue", "enqueue", "work", "collection"]


def test_the_page_runs(db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    for name in ("INGEST_DATABASE_URL", "INGEST_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", db_url)
    for args in ingest_lines():
        assert ingest(args) == 0, args
    capsys.readouterr()
    namespace: dict[str, object] = {"__name__": "integrations_docs"}
    for number, block in enumerate(blocks("python"), 1):
        exec(compile(block, f"docs/integrations.md block {number}", "exec"), namespace)  # noqa: S102 - the doc's own code

    printed = capsys.readouterr().out
    leases = (ROOT / "samples" / "postgres-leases.md").resolve().as_uri()
    tea = (ROOT / "samples" / "tea-notes.txt").resolve().as_uri()
    # LlamaIndex: the engine's prompt (echoed) holds the passage that answers, with its source
    assert "its late completion changes nothing. This is called fencing." in printed
    assert f"source_uri: {leases}" in printed
    assert re.search(rf"^\d\.\d\d {re.escape(leases)} Leases and fencing .* › Why fencing matters$", printed, re.M)
    assert "fencing ['handbook']\n" in printed  # alice: her collection's document, none of the kitchen's
    assert re.search(r"^green tea (\[\]|\['handbook'\])$", printed, re.M)  # lexical: none; hybrid: her nearest
    # LangChain: the chain's answer (echoed) holds the tea passage under its source, and the documents
    assert f"[{tea}]\nNotes on brewing green tea\n\nGreen tea is best brewed" in printed
    assert f"{tea} Notes on brewing green tea" in printed
    for name in ("retriever", "as_alice"):  # closed by the page, with the index they opened
        with pytest.raises(Exception, match="this index is closed"):
            namespace[name].index.search("tea")  # type: ignore[attr-defined]
