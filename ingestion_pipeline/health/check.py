"""What a health check returns (IndexCheck) and every check's name with what it asserts
(DESCRIPTIONS, in the order run_index_checks returns them). A warning (WARNINGS) is said
when it fails, never fails the health check: `ingest health` exits 0 for it, and Dagster
shows it at severity WARN."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class IndexCheck:
    name: str
    passed: bool
    message: str  # one line, for the CLI and the check's description in the UI
    metadata: dict[str, int | str] = field(default_factory=dict)

    @property
    def warning(self) -> bool:
        """A warning: when it fails, said, never a reason for the health check to fail."""
        return self.name in WARNINGS

    @property
    def needs_action(self) -> bool:
        return not self.passed and not self.warning


# name -> what the check asserts (the asset check's description)
DESCRIPTIONS = {
    # queue.py
    "schema_matches_migrations": "The database's schema equals what the migrations build (`ingest db check-drift`).",
    "no_stuck_batches": "No import batch says pending/processing although all its jobs are done.",
    "counts_match_rows": "Stored counts equal the rows: documents' page/section/chunk counts, batches' "
    "job counters, and every indexed document has a committed generation.",
    "no_stale_leases": "No job holds a lease past its deadline (a dead worker's jobs wait for the janitor).",
    "pending_jobs_fresh": "The oldest pending job waited less than INGEST_MAX_PENDING_AGE_SECONDS.",
    "no_duplicate_documents": "No live keyless document holds the bytes of a keyed document's latest version "
    "(a copy the previous release's enqueue made during the upgrade, which search returns twice).",
    # vectors.py
    "vectors_present": "Every live indexed document has vectors when INGEST_EMBEDDER makes them.",
    "one_embedder": "The live documents' vectors were made by one embedder (name and dimensions), "
    "the one INGEST_EMBEDDER configures.",
    "vector_index_present": "Where pgvector is installed, the HNSW index of the documents' mean vectors "
    "for the configured embedder's dimension exists and is valid.",
    # failures.py
    "no_failed_documents": "No live document's latest version failed to index (WARN: a bad document fails its "
    "own job, never the index; `ingest status` lists them with their errors).",
}
WARNINGS = frozenset({"no_failed_documents"})
