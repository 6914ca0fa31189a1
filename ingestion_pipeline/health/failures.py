"""The warning among the checks: live documents whose latest version failed to index. A bad
document fails its own job, never the index, so this check warns: `ingest health` says how
many and which commands list and retry them, and still exits 0; Dagster shows it at WARN."""

from __future__ import annotations

import psycopg

from ingestion_pipeline.db.connection import connect, execute_as_dicts
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.errors import IngestError, first_line
from ingestion_pipeline.health.check import IndexCheck

NAME = "no_failed_documents"
LISTED_BY = "`ingest status` lists them with their errors; `ingest retry --failed` queues them again"


def failed_documents_check(url: str) -> IndexCheck:
    try:
        with connect(url) as conn:
            row = execute_as_dicts(conn, query("failed_documents")).fetchone()
    except (IngestError, psycopg.Error) as exc:
        return IndexCheck(NAME, False, f"could not count the failed documents: {first_line(exc)}")
    failed, searchable = (row["documents"], row["searchable"]) if row else (0, 0)
    metadata: dict[str, int | str] = {"failed_documents": failed, "still_searchable": searchable}
    if not failed:
        return IndexCheck(NAME, True, "no failed document", metadata)
    # A document whose new version failed keeps the version indexed before: search returns that one.
    older = f" ({searchable} keep an older version searchable)" if searchable else ""
    return IndexCheck(NAME, False, f"{failed} document(s) failed to index{older}: {LISTED_BY}", metadata)
