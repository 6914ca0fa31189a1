"""Files made by the converters users' files come from (pandoc, LibreOffice, Python's email
package, page scans rendered at 150 dpi), built by ingest_testing.converted,
through the whole pipeline: every file is indexed, and a phrase from the middle of each
finds that file among the first three hits."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ingest_testing.converted import CORPUS_TOOLS, ConvertedFile, build_corpus
from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.connection import connect
from tests.helpers import index_folder
from tests.tools import require_tools


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[ConvertedFile]]:
    require_tools(CORPUS_TOOLS, "the converted corpus")
    folder = tmp_path_factory.mktemp("converted")
    started = time.monotonic()
    files = build_corpus(folder)
    print(f"corpus: {len(files)} records, {len({f.path for f in files})} files in {time.monotonic() - started:.1f} s")
    return folder, files


@pytest.mark.one_server  # parsing is the subject, not the server's SQL: run once
def test_converted_files_are_indexed_and_found(corpus, db_url, capsys):
    folder, files = corpus
    url = ["--database-url", db_url]
    drained = index_folder(folder, db_url)
    capsys.readouterr()

    with connect(db_url) as conn:
        rows = conn.execute("select source_name, status, mime_type, error_message from documents").fetchall()
    documents = {row["source_name"]: row for row in rows}
    expected = sorted({f.path.name for f in files})
    assert sorted(documents) == expected, sorted(documents)
    not_indexed = {
        name: (row["status"], row["mime_type"], row["error_message"])
        for name, row in documents.items()
        if row["status"] != "indexed"
    }
    assert not_indexed == {}, not_indexed

    misses, first = [], 0
    for file in files:
        assert ingest(["search", file.phrase, "--json", "--limit", "3", *url]) == 0
        hits = json.loads(capsys.readouterr().out)
        names = [hit["source_name"] for hit in hits]
        first += names[:1] == [file.path.name]
        if file.path.name not in names:
            misses.append((file.path.name, file.format, file.phrase, names))
    with capsys.disabled():
        print(
            f"\nenqueue and drain of {len(expected)} files: {drained:.1f} s; "
            f"{first} of {len(files)} phrases find their file first"
        )
    assert misses == [], "not among the first 3 hits (file, format, phrase, hits):\n" + "\n".join(map(str, misses))
