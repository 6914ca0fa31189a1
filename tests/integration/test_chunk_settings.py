"""INGEST_CHUNK_CHARS and INGEST_CHUNK_OVERLAP_CHARS reach the parsing children of `ingest
work`, apply to documents built from then on, and `ingest reindex --all` cuts the indexed
ones again; a bad value is one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.search_server_off import SEARCH_SERVER_OFF

INGEST = Path(sys.executable).parent / "ingest"
PARAGRAPH = "Lighthouse keepers trimmed the wicks at dusk and logged the weather twice a night. "


def ingest(cwd: Path, db_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")}
    clean |= SEARCH_SERVER_OFF
    # The hash embedder: no model to load; one parsing child: the cut happens there.
    clean.update(DATABASE_URL=db_url, INGEST_EMBEDDER="hash", INGEST_PARSE_PROCESSES="1", **env)
    done = subprocess.run([str(INGEST), *args], cwd=cwd, env=clean, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return done


def chunk_lengths(conn) -> list[int]:
    rows = conn.execute(
        "select length(c.content) as n from document_chunks c"
        " join documents d on d.index_generation_id = c.index_generation_id order by c.ordinal"
    ).fetchall()
    return [row["n"] for row in rows]


def test_chunk_size_applies_to_new_builds_and_reindex_all_cuts_indexed_documents_again(tmp_path, db_url, conn):
    (tmp_path / "keepers.md").write_text("# Keepers\n\n" + PARAGRAPH * 60)  # ~5,000 characters, one section
    ingest(tmp_path, db_url, "enqueue", "keepers.md", INGEST_CHUNK_CHARS="300", INGEST_CHUNK_OVERLAP_CHARS="0")
    ingest(tmp_path, db_url, "work", "--drain", INGEST_CHUNK_CHARS="300", INGEST_CHUNK_OVERLAP_CHARS="0")
    small = chunk_lengths(conn)
    assert len(small) >= 15 and max(small) <= 300

    # Another size in a worker's environment changes nothing already indexed …
    ingest(tmp_path, db_url, "work", "--drain", INGEST_CHUNK_CHARS="2000")
    assert chunk_lengths(conn) == small
    # … until the documents are built again.
    queued = ingest(tmp_path, db_url, "reindex", "--all")
    assert "1 reindex queued" in queued.stdout
    ingest(tmp_path, db_url, "work", "--drain", INGEST_CHUNK_CHARS="2000", INGEST_CHUNK_OVERLAP_CHARS="100")
    large = chunk_lengths(conn)
    assert 3 <= len(large) < len(small) and max(large) <= 2000 and max(large) > 300


def test_an_overlap_of_half_the_chunk_or_more_is_refused_in_one_line(tmp_path):
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("INGEST_")}
    clean |= SEARCH_SERVER_OFF
    clean.update(INGEST_CHUNK_CHARS="500", INGEST_CHUNK_OVERLAP_CHARS="250")
    done = subprocess.run(
        [str(INGEST), "work", "--drain"], cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "ingest: error: bad settings: INGEST_CHUNK_OVERLAP_CHARS (250) must be less than half of "
        "INGEST_CHUNK_CHARS (500): a larger overlap repeats most of every chunk in the next one"
    )
