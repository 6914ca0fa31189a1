"""The worker's processors: what a claimed job builds before it is acknowledged.

`index_document` (the default) turns the document's bytes into its next index generation:
load, parse, chunk, embed, then begin a generation and write its rows (fenced by the
database). The job's completion commits that generation. `no_op` builds nothing (the job
just completes): the queue's own cost, for benchmarks.
"""

from __future__ import annotations

from uuid import UUID

from ingestion_pipeline.db.chunk_table import ChunkTable
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.processing import ProcessingError, chunk_sections, embed_chunks, embedder_record, parse
from ingestion_pipeline.worker.artifacts import EncodedArtifacts, encode_artifacts, write_encoded
from ingestion_pipeline.worker.errors import LeaseLost, describe, is_build_refused
from ingestion_pipeline.worker.isolation import ParsePool
from ingestion_pipeline.worker.job import Built, JobRun


def index_document(run: JobRun) -> Built:
    job, ctx = run.job, run.ctx
    with run.stage("load", 5):
        with ctx.pool.connection() as conn:
            row = conn.execute(query("load_document_source"), {"document_id": job.document_id}).fetchone()
        if row is None:
            raise ProcessingError("the document's uploaded bytes are missing")
    # Looked up once per worker, and before a connection is taken (the look-up takes one).
    table = ctx.rpc.chunk_table
    if ctx.parse_pool is None:
        artifacts = _process_in_thread(run, bytes(row["content"]), table)
    else:
        artifacts = _process_in_child(run, ctx.parse_pool, bytes(row["content"]), table)
    with run.stage("write", 80, chunks=artifacts.chunk_count):
        begun = run.fenced(
            ctx.rpc.begin_generation(job.job_id, job.document_id, ctx.worker_id, lease_token=job.lease_token)
        )
        if begun.generation_id is None:
            raise RuntimeError("begin_generation answered without a generation id")
        _write(run, begun.generation_id, artifacts)
    metadata: dict[str, object] = {
        "title": artifacts.title,
        "mime_type": artifacts.mime_type,
        "embedder": ctx.embedder.name,
    }
    metadata = {k: v for k, v in metadata.items() if v}
    # Always written, so a new version's build clears the notes of the one before.
    metadata["notes"] = list(artifacts.notes)
    # A PDF's page labels ("iv", "A-3") by page ordinal, where they are not the numbers.
    metadata["page_labels"] = list(artifacts.page_labels)
    # After embedding: an endpoint's dimensions are known from its first answer.
    return Built(begun.generation_id, metadata, artifacts.chunk_count, embedder_record(ctx.embedder).as_json())


def _process_in_thread(run: JobRun, content: bytes, table: ChunkTable) -> EncodedArtifacts:
    job, ctx = run.job, run.ctx
    with run.stage("parse", 20):
        parsed = parse(content, job.source_name, max_bytes=ctx.max_bytes, ocr=ctx.ocr)
    with run.stage("chunk", 40):
        chunks = chunk_sections(parsed.sections, ctx.chunking)
    with run.stage("embed", 60, embedder=ctx.embedder.name):
        chunks = embed_chunks(chunks, ctx.embedder, parsed)
    return encode_artifacts(parsed, chunks, table=table)


def _process_in_child(run: JobRun, pool: ParsePool, content: bytes, table: ChunkTable) -> EncodedArtifacts:
    """Parse, chunk, embed and encode the rows in one task of the worker's parsing children
    (within their time and memory limits); the stage log keeps the three stages, timed in
    the child. An embedder that cannot be sent to a child embeds here, in the job's thread."""
    job, ctx = run.job, run.ctx
    in_child = pool.accepts(ctx.embedder)
    with run.stage("parse", 20, isolated=True):
        processed = pool.process(
            run.lease.lost,
            content,
            job.source_name,
            ctx.max_bytes,
            ctx.chunking,
            ctx.embedder if in_child else None,
            embed_here=in_child,
            table=table,
            ocr=ctx.ocr,
        )
    run.record_stage("chunk", processed.seconds["chunk"], isolated=True)
    if processed.encoded is not None:  # embedded in the child (in_child), or nothing to embed
        run.record_stage("embed", processed.seconds.get("embed", 0.0), isolated=True, embedder=ctx.embedder.name)
        return processed.encoded
    if processed.document is None or processed.chunks is None:
        raise RuntimeError("the parsing child answered with neither rows nor a parsed document")
    with run.stage("embed", 60, embedder=ctx.embedder.name):
        chunks = embed_chunks(processed.chunks, ctx.embedder, processed.document)
    return encode_artifacts(processed.document, chunks, table=table)


def _write(run: JobRun, generation_id: UUID, artifacts: EncodedArtifacts) -> None:
    try:
        with run.ctx.pool.connection() as conn:
            write_encoded(conn, run.job.document_id, generation_id, artifacts, run.lease.check)
    except Exception as exc:
        if is_build_refused(exc):  # the database says this claim no longer holds the job
            run.lease.lost.set()
            raise LeaseLost(
                f"lease on job {run.job.job_id} was lost (artifact rows refused: {describe(exc)})"
            ) from None
        raise


def no_op(run: JobRun) -> Built:
    return Built()
