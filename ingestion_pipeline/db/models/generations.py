"""Results of the generation RPCs (db/rpc/generations.py): a generation begun or committed
with its counts, the guarded cleanup of deleted documents and abandoned generations, and the
removal of older versions' kept bytes, and the compaction of the search term counts."""

from __future__ import annotations

from uuid import UUID

from ingestion_pipeline.db.models.refusals import RpcResult


class GenerationResult(RpcResult):
    generation_id: UUID | None = None
    page_count: int | None = None
    section_count: int | None = None
    chunk_count: int | None = None


class CleanupResult(RpcResult):
    dry_run: bool
    documents: int = 0
    pages: int = 0
    sections: int = 0
    chunks: int = 0
    generations: int = 0
    sources: int = 0  # bytes of deleted documents (lifecycle schema)


class KeptBytesCleaned(RpcResult):
    """Older versions' kept bytes removed (or, in a dry run, owed): how many versions, how
    many bytes as stored."""

    dry_run: bool
    keep_versions: int
    versions: int = 0
    bytes: int = 0


class SearchTermsCompacted(RpcResult):
    """The search term counts' delta rows folded: rows removed, rows written in their place."""

    removed: int = 0
    written: int = 0
